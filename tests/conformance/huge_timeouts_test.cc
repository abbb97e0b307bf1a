// Timeouts too large to add to "now" (milliseconds::max(), years) mean "practically never",
// on every backend × dispatch mode: no signed overflow (UBSan checks it in the asan preset),
// and no deadline that wrapped into the past and fires at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class huge_timeouts_test : public backend_test {};

TEST_P(huge_timeouts_test, start_async_and_set_timeout_with_the_largest_duration_do_not_expire) {
    srv().route("GET", "/a", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds::max());
        events_.attach(ctx);
        EXPECT_TRUE(ctx.set_timeout(milliseconds::max()));
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(100)); // long enough for a wrapped deadline to fire
            EXPECT_TRUE(ctx.set_timeout(milliseconds::max()));
            std::this_thread::sleep_for(milliseconds(100));
            EXPECT_TRUE(ctx.complete(response(200).text("late but fine")));
        });
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/a"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "late but fine");
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(events_.sequence(), "complete");
}

TEST_P(huge_timeouts_test, post_after_with_the_largest_delay_never_runs_and_stop_still_finishes) {
    auto ran = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/p", [ran](exchange& ex) {
        EXPECT_TRUE(ex.executor().post_after(milliseconds::max(), [ran] { *ran = true; }));
        EXPECT_TRUE(ex.executor().post_after(milliseconds::min(), [] {})); // in the past: at once
        ex.response().text("posted");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/p"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "posted");
    c.read_for(milliseconds(100));
    EXPECT_FALSE(ran->load());
    srv().stop();
    EXPECT_FALSE(ran->load());
}

SLUICE_BACKEND_SUITE(huge_timeouts_test);

} // namespace
} // namespace sluice::test
