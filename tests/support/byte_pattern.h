// The test bodies whose byte i is 'a' + i % 26: a reader can check any slice of them, wherever
// a stream was cut or split.
#pragma once

#include <cstddef>
#include <string>

namespace sluice::test {

inline std::string pattern_bytes(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = static_cast<char>('a' + i % 26);
    }
    return s;
}

} // namespace sluice::test
