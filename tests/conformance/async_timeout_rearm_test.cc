// set_timeout() while the timeout is being handled (issue 6, defect 11). Servlet's
// AsyncListener.onTimeout may extend the exchange; here, an on_timeout listener (or another
// thread while the listeners run) that calls set_timeout() re-arms the timeout: unless a
// listener also completed or resumed, the exchange stays suspended with the new timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

using async_timeout_rearm_test = backend_test;

TEST_P(async_timeout_rearm_test, listener_that_rearms_extends_the_exchange_until_it_completes) {
    auto rearmed = std::make_shared<std::atomic<int>>(-1);
    srv().route("GET", "/t", [this, rearmed](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([rearmed](const async_event& ev) {
            auto c = ev.context;
            *rearmed = c.set_timeout(milliseconds(10'000)) ? 1 : 0;
        });
        events_.attach(ctx);
        bg_.run([ctx]() mutable {
            // Complete well after the first timeout, well before the re-armed one.
            std::this_thread::sleep_for(milliseconds(400));
            EXPECT_TRUE(ctx.complete(response(200).text("after the extension")));
        });
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "after the extension");
    EXPECT_EQ(rearmed->load(), 1) << "set_timeout() from on_timeout must be accepted";
    ASSERT_TRUE(events_.wait_for_count(2));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_FALSE(events_.events()[1].error) << events_.events()[1].error.message();
}

// A set_timeout() accepted while suspended is taken by the loop through its mailbox. When the
// loop is busy in a task past the old deadline, the old deadline's timer fires before the loop
// reads the mailbox again: it must give way to the change it has not seen yet, which was made
// first (found by review: the client got 503 after set_timeout() had returned true).
TEST_P(async_timeout_rearm_test, an_extension_the_loop_has_not_taken_yet_beats_the_old_deadline) {
    auto extended = std::make_shared<std::atomic<int>>(-1);
    srv().route("GET", "/t", [this, extended](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(200));
        events_.attach(ctx);
        executor exec = ex.executor();
        EXPECT_TRUE(exec.post([ctx, exec, extended]() mutable {
            *extended = ctx.set_timeout(milliseconds(10'000)) ? 1 : 0;
            std::this_thread::sleep_for(milliseconds(400)); // busy past the old deadline
            EXPECT_TRUE(exec.post_after(milliseconds(100), [ctx]() mutable {
                EXPECT_TRUE(ctx.complete(response(200).text("within the extension")));
            }));
        }));
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(extended->load(), 1);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->body, "within the extension");
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(events_.sequence(), "complete");
}

TEST_P(async_timeout_rearm_test, rearmed_timeout_fires_again_with_the_new_duration) {
    auto rounds = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/t", [this, rounds](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([rounds](const async_event& ev) {
            if (++*rounds == 1) {
                auto c = ev.context;
                EXPECT_TRUE(c.set_timeout(milliseconds(300)));
            }
        });
        events_.attach(ctx);
    });
    srv().start();
    const auto from = test_clock::now();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_GE(test_clock::now() - from, milliseconds(400)) << "the second timeout came too early";
    EXPECT_EQ(rounds->load(), 2);
    ASSERT_TRUE(events_.wait_for_count(3));
    EXPECT_EQ(events_.sequence(), "timeout,timeout,complete");
    EXPECT_EQ(events_.events()[2].error, make_error_code(exchange_errc::timed_out));
}

TEST_P(async_timeout_rearm_test, complete_in_the_same_listener_wins_over_the_rearm) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([](const async_event& ev) {
            auto c = ev.context;
            EXPECT_TRUE(c.set_timeout(milliseconds(10'000)));
            EXPECT_TRUE(c.complete(response(200).text("completed by the listener")));
        });
        events_.attach(ctx);
    });
    srv().start();
    const auto from = test_clock::now();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "completed by the listener");
    EXPECT_LT(test_clock::now() - from, milliseconds(5000));
    ASSERT_TRUE(events_.wait_for_count(2));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
}

TEST_P(async_timeout_rearm_test, rearm_to_zero_means_no_timeout_any_more) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        contexts_.add(ctx);
        ctx.on_timeout([](const async_event& ev) {
            auto c = ev.context;
            EXPECT_TRUE(c.set_timeout(milliseconds(0)));
        });
        events_.attach(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/t"))) << c.error();
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(c.read_for(milliseconds(400)), 0u)
        << "answered despite the re-arm: " << printable(c.buffered());
    EXPECT_EQ(srv().stats().exchanges_suspended, 1u);
    ASSERT_TRUE(contexts_.at(0).complete(response(200).text("eventually")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "eventually");
    ASSERT_TRUE(events_.wait_for_count(2));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
}

SLUICE_BACKEND_SUITE(async_timeout_rearm_test);

} // namespace
} // namespace sluice::test
