#include "support/get_body.h"

#include <gtest/gtest.h>

#include "support/deadline.h"

namespace sluice::test {

std::string get_body(std::uint16_t port, std::string_view target, client_transport transport) {
    test_client c(port, default_timeout, transport);
    EXPECT_TRUE(c.connected()) << c.error();
    EXPECT_TRUE(c.send(get_request(target))) << c.error();
    auto r = c.read_response();
    EXPECT_TRUE(r) << c.error();
    return r ? r->body : std::string();
}

} // namespace sluice::test
