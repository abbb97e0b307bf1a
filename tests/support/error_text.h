// An error code as a test message prints it: "error <category>:<value>", comparable with
// EXPECT_EQ against a body that a handler wrote the same way.
#pragma once

#include <string>
#include <system_error>

#include <sluice/client.h>

namespace sluice::test {

inline std::string error_text(std::error_code e) {
    return "error " + std::string(e.category().name()) + ":" + std::to_string(e.value());
}

inline std::string error_text(client_errc e) {
    return error_text(make_error_code(e));
}

} // namespace sluice::test
