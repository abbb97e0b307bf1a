// One GET over a fresh connection: the response body, or "" with a test failure recorded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "support/test_client.h"

namespace sluice::test {

std::string get_body(std::uint16_t port, std::string_view target, client_transport transport);

} // namespace sluice::test
