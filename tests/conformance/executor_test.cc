// The loop's executor on every backend × dispatch mode: post and post_after run on the
// exchange's I/O loop thread (timers without a sleeping thread), and a copy that outlives
// the server refuses work and never touches the freed loop (executor.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>

#include <sluice/exchange.h>
#include <sluice/executor.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

using executor_test = backend_test;

TEST_P(executor_test, executor_post_after_runs_on_the_loop_after_the_delay) {
    struct state {
        std::atomic<bool> in_loop{false};
        std::atomic<std::int64_t> fired_after_ms{-1};
    };
    auto st = std::make_shared<state>();
    srv().route("GET", "/timer", [st](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        const auto exec = ex.executor();
        ASSERT_TRUE(exec);
        const auto start = test_clock::now();
        EXPECT_TRUE(exec.post_after(milliseconds(80), [ctx, exec, start, st]() mutable {
            st->in_loop = exec.in_loop_thread();
            st->fired_after_ms = std::chrono::duration_cast<milliseconds>(test_clock::now() - start).count();
            ctx.complete(response(200).text("timer"));
        }));
    });
    srv().start();
    auto r = fetch("/timer");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "timer");
    EXPECT_TRUE(st->in_loop.load());
    EXPECT_GE(st->fired_after_ms.load(), 75);
}

TEST_P(executor_test, executor_post_from_another_thread_runs_on_the_loop) {
    auto in_loop = std::make_shared<std::atomic<int>>(-1);
    srv().route("GET", "/post", [this, in_loop](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        const auto exec = ex.executor();
        bg_.run([ctx, exec, in_loop]() mutable {
            EXPECT_FALSE(exec.in_loop_thread());
            EXPECT_TRUE(exec.post([ctx, exec, in_loop]() mutable {
                *in_loop = exec.in_loop_thread() ? 1 : 0;
                ctx.complete(response(200).text("posted"));
            }));
        });
    });
    srv().start();
    auto r = fetch("/post");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "posted");
    EXPECT_EQ(in_loop->load(), 1);
}

TEST_P(executor_test, a_posted_task_that_throws_is_logged_and_the_loop_goes_on) {
    // A posted task is the user's code on the loop, as a handler or a post_after() timer is:
    // what it throws is logged, and the loop serves on (it once left the loop's thread, and
    // std::terminate ended the process: e.g. a client callback calling value() on a failure).
    srv().route("GET", "/throw", [](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        const auto exec = ex.executor();
        EXPECT_TRUE(exec.post([] { throw std::runtime_error("posted task failed"); }));
        EXPECT_TRUE(exec.post([ctx]() mutable { ctx.complete(response(200).text("after")); }));
    });
    srv().start();
    auto r = fetch("/throw");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "after");
    EXPECT_TRUE(srv().log().wait_for("posted task failed"));
    auto again = fetch("/throw");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->body, "after");
}

TEST_P(executor_test, executor_outliving_the_server_refuses_posts) {
    auto kept = std::make_shared<executor>();
    auto mu = std::make_shared<std::mutex>();
    srv().route("GET", "/e", [kept, mu](exchange& ex) {
        std::lock_guard lock(*mu);
        *kept = ex.executor();
        ex.response().text("ok");
    });
    srv().start();
    ASSERT_TRUE(fetch("/e"));
    srv().destroy();
    std::lock_guard lock(*mu);
    ASSERT_TRUE(*kept);
    EXPECT_FALSE(kept->post([] { ADD_FAILURE() << "ran after the server was destroyed"; }));
    EXPECT_FALSE(kept->post_after(milliseconds(1), [] { ADD_FAILURE() << "ran after destroy"; }));
}

TEST_P(executor_test, executor_outliving_the_server_is_not_in_its_loop_thread) {
    // executor.h: "safe to outlive the loop". in_loop_thread() must not read the freed loop.
    auto kept = std::make_shared<executor>();
    auto mu = std::make_shared<std::mutex>();
    srv().route("GET", "/e", [kept, mu](exchange& ex) {
        std::lock_guard lock(*mu);
        *kept = ex.executor();
        ex.response().text("ok");
    });
    srv().start();
    ASSERT_TRUE(fetch("/e"));
    srv().destroy();
    std::lock_guard lock(*mu);
    ASSERT_TRUE(*kept);
    EXPECT_FALSE(kept->in_loop_thread());
}

SLUICE_BACKEND_SUITE(executor_test);

} // namespace
} // namespace sluice::test
