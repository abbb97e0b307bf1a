// A coroutine handler whose exchange ends while it waits, on every backend × dispatch mode:
// the async timeout (503), the client leaving, the server stopping, and a completion made by
// someone else. In each case the pending await completes with operation_canceled (its
// canceller runs), the coroutine observes it on the loop thread, later awaits fail at once,
// and the frame is destroyed before the exchange is released (ASan and TSan check the rest).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
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

/// What a coroutine saw; shared with the test thread.
struct observed {
    std::atomic<int> first_error{-1}; ///< the pending await's error value
    std::atomic<bool> first_cancelled{false};
    std::atomic<bool> on_loop{false};     ///< resumed on the exchange's loop thread
    std::atomic<int> second_error{-1};    ///< a later await's error value
    std::atomic<long> second_wait_ms{-1}; ///< how long that later await took
    std::atomic<int> frames_destroyed{0};
    std::atomic<int> finished{0};
};

/// Counts the frame's destruction: a local of the coroutine.
struct frame_probe {
    observed* o;
    ~frame_probe() { ++o->frames_destroyed; }
};

class coroutine_cancel_test : public backend_test {
protected:
    /// A coroutine that waits on `first` (for the whole test), then tries to sleep once more.
    template <class Op>
    void add_waiting_route(std::shared_ptr<observed> o, Op first) {
        srv().route("GET", "/wait", [this, o, first](exchange& ex) -> task<> {
            frame_probe probe{o.get()};
            auto ctx = ex.context();
            events_.attach(ctx);
            contexts_.add(ctx);
            const std::error_code ec = co_await first(ex);
            o->first_error = ec.value();
            o->first_cancelled = ec == std::errc::operation_canceled;
            o->on_loop = ex.executor().in_loop_thread();
            ex.response().text("written after the cancellation: never sent");
            const auto t0 = test_clock::now();
            const std::error_code ec2 = co_await sleep_for(ex, milliseconds(5000));
            o->second_error = ec2.value();
            o->second_wait_ms = std::chrono::duration_cast<milliseconds>(test_clock::now() - t0).count();
            ++o->finished;
        });
    }

    void expect_cancelled_coroutine(const observed& o) {
        EXPECT_TRUE(wait_until([&] { return o.frames_destroyed.load() == 1; }))
            << "the frame was not destroyed";
        EXPECT_TRUE(o.first_cancelled.load()) << "first await error " << o.first_error.load();
        EXPECT_TRUE(o.on_loop.load());
        EXPECT_EQ(o.second_error.load(), static_cast<int>(std::errc::operation_canceled));
        EXPECT_LT(o.second_wait_ms.load(), 1000) << "an await after the cancellation must fail at once";
        EXPECT_EQ(o.finished.load(), 1);
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
    }
};

TEST_P(coroutine_cancel_test, timeout_while_awaiting_is_503_and_cancels_the_await) {
    srv().config().async_timeout_ms = 150;
    auto o = std::make_shared<observed>();
    add_waiting_route(o, [](exchange& ex) { return sleep_for(ex, milliseconds(10'000)); });
    srv().start();
    test_client c(srv().port());
    const auto t0 = test_clock::now();
    ASSERT_TRUE(c.send(get_request("/wait"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    EXPECT_LT(test_clock::now() - t0, milliseconds(3000));
    expect_cancelled_coroutine(*o);
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    // The connection stays usable.
    ASSERT_TRUE(c.send(get_request("/wait"))) << c.error();
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->status, 503);
}

TEST_P(coroutine_cancel_test, timeout_status_chosen_by_the_coroutine) {
    srv().config().async_timeout_ms = 100;
    srv().route("GET", "/gw", [](exchange& ex) -> task<> {
        ex.context().set_timeout_status(504);
        co_await sleep_for(ex, milliseconds(10'000));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/gw"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 504);
}

TEST_P(coroutine_cancel_test, disconnect_while_awaiting_cancels_the_await) {
    auto o = std::make_shared<observed>();
    auto box = std::make_shared<completion_box<std::string>>();
    add_waiting_route(o, [box](exchange&) -> task<std::error_code> {
        result<std::string> r = co_await box->op();
        co_return r.error();
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/wait"))) << c.error();
    ASSERT_TRUE(box->wait_for(1));
    ASSERT_TRUE(srv().wait_suspended(1));
    c.close_abortive();
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::client_disconnected));
    expect_cancelled_coroutine(*o);
    EXPECT_EQ(box->cancelled(), 1u) << "the operation's canceller runs once";
    // The operation completing now (from this thread) reaches nothing.
    for (auto& done : box->take_all()) {
        done(std::string("too late"));
    }
    EXPECT_EQ(o->finished.load(), 1);
}

TEST_P(coroutine_cancel_test, server_stop_while_awaiting_cancels_the_await) {
    auto o = std::make_shared<observed>();
    add_waiting_route(o, [](exchange& ex) { return sleep_for(ex, milliseconds(10'000)); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/wait"))) << c.error();
    ASSERT_TRUE(srv().wait_suspended(1));
    srv().stop();
    EXPECT_EQ(o->frames_destroyed.load(), 1) << "stop() returns after every frame is gone";
    EXPECT_TRUE(o->first_cancelled.load());
    EXPECT_EQ(o->finished.load(), 1);
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::shutting_down));
}

TEST_P(coroutine_cancel_test, completed_by_someone_else_destroys_the_waiting_frame) {
    // Another party completes the exchange while the coroutine waits: the response is theirs,
    // the await is cancelled and the frame destroyed in on_complete, without resuming it.
    auto o = std::make_shared<observed>();
    auto box = std::make_shared<completion_box<int>>();
    srv().route("GET", "/taken", [this, o, box](exchange& ex) -> task<> {
        frame_probe probe{o.get()};
        auto ctx = ex.context();
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(30));
            ctx.complete(response(202).text("completed elsewhere"));
        });
        result<int> r = co_await box->op();
        ++o->finished; // never reached: the frame is destroyed while it waits
        ex.response().text(std::to_string(r.has_value()));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/taken"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 202);
    EXPECT_EQ(r->body, "completed elsewhere");
    EXPECT_TRUE(wait_until([&] { return o->frames_destroyed.load() == 1; }));
    EXPECT_EQ(o->finished.load(), 0);
    EXPECT_EQ(box->cancelled(), 1u);
    for (auto& done : box->take_all()) {
        done(7); // the frame is gone: ignored
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

// completion::on_cancel promises its canceller runs on the exchange's loop thread, also when
// it is set from the operation's own thread after the await was cancelled.
TEST_P(coroutine_cancel_test, a_canceller_set_from_another_thread_after_the_cancellation_runs_on_the_loop) {
    srv().config().async_timeout_ms = 100;
    struct late_canceller {
        std::atomic<bool> go{false};
        std::atomic<int> ran{0};
        std::atomic<bool> on_loop{false};
        std::thread worker;
    };
    auto late = std::make_shared<late_canceller>();
    struct joiner {
        late_canceller& l;
        ~joiner() {
            l.go = true;
            if (l.worker.joinable()) {
                l.worker.join();
            }
        }
    } join_at_end{*late};
    auto o = std::make_shared<observed>();
    add_waiting_route(o, [late](exchange& ex) {
        return async_op<void>([late, exec = ex.executor()](completion<void> done) {
            late->worker = std::thread([late, exec, done = std::move(done)] {
                (void)wait_until([&] { return late->go.load(); });
                done.on_cancel([late, exec] {
                    late->on_loop = exec.in_loop_thread();
                    ++late->ran;
                });
            });
        });
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/wait"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    expect_cancelled_coroutine(*o);
    late->go = true; // the await is cancelled: now the operation says how to stop it
    ASSERT_TRUE(wait_until([&] { return late->ran.load() == 1; })) << "the canceller never ran";
    EXPECT_TRUE(late->on_loop.load()) << "the canceller ran off the loop thread";
}

SLUICE_BACKEND_SUITE(coroutine_cancel_test);

} // namespace
} // namespace sluice::test
