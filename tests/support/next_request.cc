#include "support/next_request.h"

#include <gtest/gtest.h>

#include <chrono>

#include <sluice/exchange.h>

#include "support/http_response.h"

namespace sluice::test {

void route_next(test_server& s) {
    s.route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
}

void expect_next_answered(test_client& c) {
    ASSERT_TRUE(c.send(get_request("/next"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "next");
    c.read_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(c.buffered().empty()) << "bytes beyond the responses: " << printable(c.buffered());
}

} // namespace sluice::test
