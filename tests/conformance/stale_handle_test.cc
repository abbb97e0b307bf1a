// Stale async handles on every backend × dispatch mode: once an exchange has ended, every
// call on its handle is a harmless no-op returning false — while the connection serves the
// next exchange (which recycles the exchange object), after stop(), and after the server is
// destroyed. A stale handle must never touch the recycled exchange.
#include <gtest/gtest.h>

#include <chrono>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class stale_handle_test : public backend_test {
protected:
    /// Every member of a stale handle: all must refuse, none may crash or reach an exchange.
    static void expect_inert(async_context& ctx, const char* when) {
        SCOPED_TRACE(when);
        EXPECT_TRUE(ctx.is_done());
        EXPECT_FALSE(ctx.complete());
        EXPECT_FALSE(ctx.complete(response(200).text("stale")));
        EXPECT_FALSE(ctx.resume());
        EXPECT_FALSE(ctx.set_timeout(milliseconds(1)));
        EXPECT_FALSE(ctx.set_timeout_status(504));
        auto never = [](const async_event&) { ADD_FAILURE() << "a listener added to a stale handle ran"; };
        EXPECT_FALSE(ctx.on_timeout(never));
        EXPECT_FALSE(ctx.on_error(never));
        EXPECT_FALSE(ctx.on_complete(never));
        ctx.set_attribute("stale", 1); // allowed, and harmless
        (void)ctx.attribute_any("stale");
        async_context copy = ctx;
        EXPECT_FALSE(copy.complete());
    }
};

TEST_P(stale_handle_test, stale_handle_is_inert_across_recycling_stop_and_destroy) {
    srv().route("GET", "/s", [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(5000))); });
    srv().start();
    test_client c(srv().port());

    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    auto first = contexts_.at(0);
    EXPECT_FALSE(first.is_done());
    ASSERT_TRUE(first.complete(response(200).text("one")));
    auto r1 = c.read_response();
    ASSERT_TRUE(r1) << c.error();
    EXPECT_EQ(r1->body, "one");
    ASSERT_TRUE(wait_until([&] { return first.is_done(); }));
    expect_inert(first, "after completion");

    // The same connection's next exchange (the recycled object) is suspended now.
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(contexts_.wait_for(2));
    ASSERT_TRUE(srv().wait_suspended(1));
    expect_inert(first, "while the next exchange is suspended");
    EXPECT_EQ(c.read_for(milliseconds(100)), 0u)
        << "a stale call reached the new exchange: " << printable(c.buffered());
    EXPECT_EQ(srv().stats().exchanges_suspended, 1u);
    auto second = contexts_.at(1);
    ASSERT_TRUE(second.complete(response(200).text("two")));
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->body, "two");

    srv().stop();
    expect_inert(first, "after stop()");
    expect_inert(second, "after stop()");
    srv().destroy();
    expect_inert(first, "after the server was destroyed");
    expect_inert(second, "after the server was destroyed");
}

TEST_P(stale_handle_test, handle_of_a_timed_out_exchange_is_inert) {
    srv().route("GET", "/s", [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(50))); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    auto ctx = contexts_.at(0);
    ASSERT_TRUE(wait_until([&] { return ctx.is_done(); }));
    expect_inert(ctx, "after the timeout");
    srv().destroy();
    expect_inert(ctx, "after the server was destroyed");
}

TEST_P(stale_handle_test, empty_handle_refuses_everything) {
    async_context empty;
    EXPECT_FALSE(empty);
    expect_inert(empty, "empty handle");
}

SLUICE_BACKEND_SUITE(stale_handle_test);

} // namespace
} // namespace sluice::test
