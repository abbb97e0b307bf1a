// The program's name for messages and the usage text: argv[0]'s last path component.
#pragma once

#include <string>
#include <string_view>

namespace sluice::detail {

inline std::string program_name(int argc, const char* const* argv) {
    if (argc < 1 || argv == nullptr || argv[0] == nullptr || argv[0][0] == '\0') {
        return "sluice";
    }
    const std::string_view path(argv[0]);
    const std::size_t slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

} // namespace sluice::detail
