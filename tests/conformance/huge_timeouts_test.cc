// Timeouts too large to add to "now" (milliseconds::max(), years) mean "practically never",
// on every backend × dispatch mode: no signed overflow (UBSan checks it in the asan preset),
// and no deadline that wrapped into the past and fires at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include <sluice/coro.h>
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

// A negative timeout is refused however small: rounded up to whole milliseconds, one above -1 ms
// became 0, "no timeout", and the exchange waited for good (a deadline just past, as
// deadline - now()).
TEST_P(huge_timeouts_test, a_negative_timeout_is_refused_however_small) {
    auto refused = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/start", [](exchange& ex) { (void)ex.start_async(std::chrono::microseconds(-500)); });
    srv().route("GET", "/set", [refused](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        *refused += ctx.set_timeout(std::chrono::nanoseconds(-1)) ? 0 : 1;
        *refused += ctx.set_timeout(std::chrono::duration<double>(-1e-4)) ? 0 : 1;
        ctx.complete(response(200).text("done"));
    });
    srv().start();
    test_client a(srv().port(), milliseconds(3000));
    ASSERT_TRUE(a.send(get_request("/start"))) << a.error();
    auto r = a.read_response();
    ASSERT_TRUE(r) << a.error();
    EXPECT_EQ(r->status, 500);
    test_client b(srv().port(), milliseconds(3000));
    ASSERT_TRUE(b.send(get_request("/set"))) << b.error();
    r = b.read_response();
    ASSERT_TRUE(r) << b.error();
    EXPECT_EQ(r->body, "done");
    EXPECT_EQ(refused->load(), 2);
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

TEST_P(huge_timeouts_test,
       coarse_units_too_large_for_milliseconds_saturate_in_start_async_set_timeout_and_post_after) {
    // hours::max() in milliseconds does not fit in 64 bits: converted with a multiplication it
    // wraps (in practice to -3,600,000: a negative timeout, refused) instead of meaning "never".
    auto ran = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/a", [this, ran](exchange& ex) {
        auto ctx = ex.start_async(std::chrono::hours::max());
        events_.attach(ctx);
        EXPECT_TRUE(ctx.set_timeout(std::chrono::seconds::max()));
        EXPECT_TRUE(ex.executor().post_after(std::chrono::minutes::max(), [ran] { *ran = true; }));
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(100)); // long enough for a wrapped deadline to fire
            EXPECT_TRUE(ctx.set_timeout(std::chrono::duration<double>(1e300)));
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
    EXPECT_FALSE(ran->load());
}

/// What one sleep of a coroutine gave.
struct sleep_seen {
    std::atomic<int> error{-1};
    std::atomic<long> slept_ms{-1};
};

TEST_P(huge_timeouts_test, a_coroutine_sleep_too_long_for_milliseconds_lasts_until_the_exchange_ends) {
    // GET /sleep?unit=...: sleeps "forever" in that unit; the async timeout (200 ms) ends it.
    srv().config().async_timeout_ms = 200;
    auto seen = std::make_shared<sleep_seen>();
    srv().route("GET", "/sleep", [seen](exchange& ex) -> task<> {
        const std::string unit(ex.request().query_param("unit").value_or(""));
        const auto t0 = test_clock::now();
        std::error_code ec;
        if (unit == "seconds") {
            ec = co_await sleep_for(ex, std::chrono::seconds::max());
        } else if (unit == "hours") {
            ec = co_await sleep_for(ex, std::chrono::hours::max());
        } else if (unit == "double") {
            ec = co_await sleep_for(ex, std::chrono::duration<double>(1e300));
        } else if (unit == "infinity") {
            ec = co_await sleep_for(ex,
                                    std::chrono::duration<double>(std::numeric_limits<double>::infinity()));
        } else if (unit == "unsigned") {
            ec = co_await sleep_for(ex, std::chrono::duration<unsigned long long, std::milli>(
                                            std::numeric_limits<unsigned long long>::max()));
        } else if (unit == "executor") {
            ec = co_await sleep_for(ex.executor(), std::chrono::seconds::max());
        }
        seen->error = ec.value();
        seen->slept_ms = std::chrono::duration_cast<milliseconds>(test_clock::now() - t0).count();
        ex.response().text("slept");
    });
    srv().start();
    test_client c(srv().port());
    for (const char* unit : {"seconds", "hours", "double", "infinity", "unsigned", "executor"}) {
        SCOPED_TRACE(unit);
        seen->error = -1;
        ASSERT_TRUE(c.send(get_request(std::string("/sleep?unit=") + unit))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 503) << "the sleep ended before the exchange: " << r->body;
        ASSERT_TRUE(wait_until([&] { return seen->error.load() != -1; }));
        EXPECT_EQ(seen->error.load(), static_cast<int>(std::errc::operation_canceled));
        EXPECT_GE(seen->slept_ms.load(), 150);
    }
}

SLUICE_BACKEND_SUITE(huge_timeouts_test);

} // namespace
} // namespace sluice::test
