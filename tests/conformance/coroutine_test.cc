// Coroutine handlers (coro.h) on every backend × dispatch mode: completion with what the
// coroutine wrote, timers, nested tasks, generic callback operations completed from other
// threads, and exceptions (→ 500) before and after the first suspension.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <sluice/coro.h>
#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/completion_box.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

using coroutine_test = backend_test;

TEST_P(coroutine_test, completes_with_what_the_coroutine_wrote) {
    srv().route("GET", "/co", [](exchange& ex) -> task<> {
        ex.response().status(201).header("X-Co", "yes").text("written without waiting");
        co_return;
    });
    srv().start();
    auto r = fetch("/co");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->header("X-Co"), "yes");
    EXPECT_EQ(r->body, "written without waiting");
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_test, sleep_suspends_the_exchange_and_resumes_on_its_loop) {
    struct seen {
        std::atomic<bool> on_loop{false};
        std::atomic<int> error{-1};
    };
    auto s = std::make_shared<seen>();
    srv().route("GET", "/sleep", [s](exchange& ex) -> task<> {
        const auto t0 = test_clock::now();
        const std::error_code ec = co_await sleep_for(ex, milliseconds(150));
        s->error = ec.value();
        s->on_loop = ex.executor().in_loop_thread();
        // The loop's timers run on its cached iteration clock: allow a few ms of early firing as
        // seen from steady_clock here.
        const auto waited = std::chrono::duration_cast<milliseconds>(test_clock::now() - t0);
        ex.response().text(waited.count() >= 140 ? "slept" : "woke early: " + std::to_string(waited.count()));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/sleep"))) << c.error();
    // While it waits the exchange is suspended, like any start_async() one.
    EXPECT_TRUE(srv().wait_suspended(1, milliseconds(2000)));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "slept");
    EXPECT_EQ(s->error.load(), 0);
    EXPECT_TRUE(s->on_loop.load()) << "a coroutine resumes on its exchange's loop thread";
    // The connection stays usable for the next request.
    ASSERT_TRUE(c.send(get_request("/sleep"))) << c.error();
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->body, "slept");
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_EQ(srv().stats().exchanges_suspended, 0u);
}

task<int> add_later(exchange& ex, int a, int b) {
    if (auto ec = co_await sleep_for(ex, milliseconds(5))) {
        throw std::system_error(ec);
    }
    co_return a + b;
}

task<std::string> describe(exchange& ex) {
    const int sum = co_await add_later(ex, 20, 22);
    co_return "sum=" + std::to_string(sum);
}

task<> fail_later(exchange& ex) {
    co_await sleep_for(ex, milliseconds(1));
    throw std::runtime_error("nested failure");
}

TEST_P(coroutine_test, nested_tasks_give_values_and_exceptions) {
    srv().route("GET", "/nested", [](exchange& ex) -> task<> {
        std::string text = co_await describe(ex);
        try {
            co_await fail_later(ex);
            text += " no-throw";
        } catch (const std::runtime_error& e) {
            text += std::string(" caught=") + e.what();
        }
        ex.response().text(text);
    });
    srv().start();
    auto r = fetch("/nested");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "sum=42 caught=nested failure");
}

TEST_P(coroutine_test, generic_operation_completed_from_another_thread) {
    struct seen {
        std::atomic<bool> on_loop{false};
    };
    auto s = std::make_shared<seen>();
    srv().route("GET", "/op", [this, s](exchange& ex) -> task<> {
        // Any start(callback) operation: here a thread that answers after 30 ms, twice (the
        // second call must be ignored).
        auto op = async_op<std::string>([this](completion<std::string> done) {
            bg_.run([done] {
                std::this_thread::sleep_for(milliseconds(30));
                done(std::error_code{}, std::string("from a thread"));
                done(std::string("too late"));
            });
        });
        result<std::string> r = co_await std::move(op);
        s->on_loop = ex.executor().in_loop_thread();
        ex.response().text(r ? *r : "error: " + r.error().message());
    });
    srv().start();
    auto r = fetch("/op");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "from a thread");
    EXPECT_TRUE(s->on_loop.load());
}

// The pattern on_cancel invites: the job holds the completion, the canceller holds the job. The
// operation must let go of its canceller once it has settled, or the four hold each other (and
// the runner, and the exchange's async state) for good.
TEST_P(coroutine_test, a_completed_operation_lets_go_of_its_canceller) {
    auto live = std::make_shared<std::atomic<int>>(0);
    struct job {
        job(completion<int> d, std::shared_ptr<std::atomic<int>> n) : done(std::move(d)), live(std::move(n)) {
            ++*live;
        }
        job(const job&) = delete;
        job& operator=(const job&) = delete;
        ~job() { --*live; }
        completion<int> done;
        std::shared_ptr<std::atomic<int>> live;
    };
    srv().route("GET", "/cycle", [this, live](exchange& ex) -> task<> {
        // A named operation: GCC 12 destroys a temporary's captures twice in a co_await expression.
        auto op = async_op<int>([this, live](completion<int> done) {
            auto j = std::make_shared<job>(done, live);
            done.on_cancel([j] { j->done(std::make_error_code(std::errc::operation_canceled)); });
            bg_.run([j] { j->done(42); });
        });
        result<int> r = co_await std::move(op);
        ex.response().text(r ? std::to_string(*r) : r.error().message());
    });
    srv().start();
    for (int i = 0; i < 5; ++i) {
        auto r = fetch("/cycle");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->body, "42");
    }
    EXPECT_TRUE(wait_until([&] { return live->load() == 0; })) << live->load() << " of 5 jobs still alive";
}

TEST_P(coroutine_test, operations_completed_inline_or_at_once_in_a_row) {
    // Completions that race the first suspension (pool: while the worker still returns from the
    // handler) and completions made inside the start function itself.
    srv().route("GET", "/row", [this](exchange& ex) -> task<> {
        int sum = 0;
        for (int i = 0; i < 50; ++i) {
            result<int> r = co_await async_op<int>([this, i](completion<int> done) {
                if (i % 2 == 0) {
                    done(i); // inline: still resumed through the loop, never inside this call
                } else {
                    bg_.run([done, i] { done(i); });
                }
            });
            sum += r.value();
        }
        ex.response().text(std::to_string(sum));
    });
    srv().start();
    auto r = fetch("/row");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::to_string(49 * 50 / 2));
}

TEST_P(coroutine_test, failed_and_dropped_operations_give_errors) {
    srv().route("GET", "/errors", [](exchange& ex) -> task<> {
        result<int> failed = co_await async_op<int>(
            [](completion<int> done) { done(std::make_error_code(std::errc::connection_refused)); });
        // An operation that loses its callback without calling it.
        result<int> dropped = co_await async_op<int>([](completion<int>) {});
        ex.response().text(failed.error().message() + "|" + std::to_string(dropped.has_value()) + "|" +
                           std::to_string(dropped.error() == std::future_errc::broken_promise));
    });
    srv().start();
    auto r = fetch("/errors");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::make_error_code(std::errc::connection_refused).message() + "|0|1");
}

TEST_P(coroutine_test, exception_before_the_first_suspension_is_500) {
    srv().route("GET", "/throw", [](exchange& ex) -> task<> {
        ex.response().text("not this");
        throw std::runtime_error("boom before suspending");
        co_return;
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/throw"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 500);
    EXPECT_TRUE(srv().log().wait_for("boom before suspending"));
    // The connection stays usable, as after any throwing handler.
    ASSERT_TRUE(c.send(get_request("/throw"))) << c.error();
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->status, 500);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_test, exception_after_a_suspension_is_500) {
    srv().route("GET", "/throw-later", [this](exchange& ex) -> task<> {
        auto ctx = ex.context();
        events_.attach(ctx);
        ex.response().status(200).text("half-written");
        co_await sleep_for(ex, milliseconds(20));
        throw std::runtime_error("boom after suspending");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/throw-later"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 500);
    EXPECT_NE(r->body, "half-written");
    EXPECT_TRUE(srv().log().wait_for("boom after suspending"));
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::handler_threw));
    ASSERT_TRUE(c.send(get_request("/throw-later"))) << c.error();
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->status, 500);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_test, route_helpers_and_router_wrapping_agree) {
    // sluice::server's get() takes a coroutine as it is; a handler variable needs the wrapper.
    handler wrapped = coroutine_handler([](exchange& ex) -> task<> {
        co_await sleep_for(ex, milliseconds(1));
        ex.response().text("wrapped");
    });
    srv().route("GET", "/wrapped", std::move(wrapped));
    srv().start();
    auto r = fetch("/wrapped");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "wrapped");
}

SLUICE_BACKEND_SUITE(coroutine_test);

} // namespace
} // namespace sluice::test
