// The async timeout of a coroutine handler meets an on_timeout listener, on every backend ×
// dispatch mode, behind a limiter (whose permit must come back however the exchange ends). A
// listener that re-arms the timeout (set_timeout, Servlet's setTimeout in onTimeout) extends the
// exchange: the coroutine keeps waiting and finishes it. A timeout that expires with nobody
// extending it cancels the coroutine's await and answers 503, once. A listener that completes
// the exchange answers it, and the waiting frame is destroyed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>

#include <sluice/coro.h>
#include <sluice/error.h>
#include <sluice/exchange.h>
#include <sluice/limiter.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

/// What the coroutine saw; shared with the test thread.
struct rearm_seen {
    std::atomic<int> sleep_error{-1}; ///< the sleep's error value (0: it ran its course)
    std::atomic<long> slept_ms{-1};   ///< how long the sleep took
    std::atomic<int> finished{0};     ///< the coroutine ran to its end
    std::atomic<int> frames_gone{0};  ///< the frame was destroyed
    std::atomic<int> timeouts{0};     ///< on_timeout listener runs
};

struct rearm_frame_probe {
    rearm_seen* s;
    ~rearm_frame_probe() { ++s->frames_gone; }
};

/// What the route's on_timeout listener does.
enum class on_timeout_does {
    rearm_without_limit, ///< set_timeout(0): no timeout any more
    rearm_once,          ///< set_timeout(200 ms) the first time, nothing the second
    complete,            ///< complete(response(200)) with its own body
};

class coroutine_timeout_rearm_test : public backend_test {
protected:
    /// GET /co: behind a one-permit limiter, a coroutine with an async timeout of 100 ms whose
    /// listener does `what`, then sleeps `sleep` and answers "finished".
    void add_route(limiter& lim, on_timeout_does what, milliseconds sleep) {
        srv().config().async_timeout_ms = 100;
        srv().route("GET", "/co",
                    limited(lim, coroutine_handler([this, s = seen_, what, sleep](exchange& ex) -> task<> {
                                rearm_frame_probe probe{s.get()};
                                auto ctx = ex.context();
                                ctx.on_timeout([s, what](const async_event& ev) {
                                    async_context c = ev.context;
                                    const int round = ++s->timeouts;
                                    switch (what) {
                                    case on_timeout_does::rearm_without_limit:
                                        EXPECT_TRUE(c.set_timeout(milliseconds(0)));
                                        break;
                                    case on_timeout_does::rearm_once:
                                        if (round == 1) {
                                            EXPECT_TRUE(c.set_timeout(milliseconds(200)));
                                        }
                                        break;
                                    case on_timeout_does::complete:
                                        EXPECT_TRUE(c.complete(response(200).text("from the listener")));
                                        break;
                                    }
                                });
                                events_.attach(ctx);
                                const auto t0 = test_clock::now();
                                const std::error_code ec = co_await sleep_for(ex, sleep);
                                s->sleep_error = ec.value();
                                s->slept_ms =
                                    std::chrono::duration_cast<milliseconds>(test_clock::now() - t0).count();
                                if (!ec) {
                                    ex.response().text("finished");
                                }
                                ++s->finished;
                            })));
    }

    std::shared_ptr<rearm_seen> seen_ = std::make_shared<rearm_seen>();
};

TEST_P(coroutine_timeout_rearm_test,
       a_listener_that_rearms_keeps_the_coroutine_running_to_finish_the_exchange) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    add_route(lim, on_timeout_does::rearm_without_limit, milliseconds(400));
    srv().start();
    test_client c(srv().port(), milliseconds(3000));
    ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << "the extended exchange was never finished: " << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "finished");
    EXPECT_EQ(seen_->sleep_error.load(), 0) << "the re-armed timeout must not cancel the coroutine";
    EXPECT_EQ(seen_->timeouts.load(), 1);
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_FALSE(events_.events()[1].error) << events_.events()[1].error.message();
    EXPECT_TRUE(wait_until([&] { return lim.stats().in_use == 0; })) << "the permit was kept";
    EXPECT_EQ(seen_->frames_gone.load(), 1);
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
}

TEST_P(coroutine_timeout_rearm_test,
       a_rearmed_timeout_that_expires_cancels_the_coroutine_then_and_answers_503_once) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    add_route(lim, on_timeout_does::rearm_once, milliseconds(10'000));
    srv().start();
    test_client c(srv().port(), milliseconds(3000));
    const auto t0 = test_clock::now();
    ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    EXPECT_GE(test_clock::now() - t0, milliseconds(280)) << "the extension was not honoured";
    ASSERT_TRUE(wait_until([&] { return seen_->finished.load() == 1; }));
    EXPECT_EQ(seen_->sleep_error.load(), static_cast<int>(std::errc::operation_canceled));
    EXPECT_GE(seen_->slept_ms.load(), 250) << "the coroutine was cancelled by the first, extended timeout";
    EXPECT_EQ(seen_->timeouts.load(), 2);
    ASSERT_TRUE(events_.wait_for_count(3)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "timeout,timeout,complete");
    EXPECT_EQ(events_.events()[2].error, make_error_code(exchange_errc::timed_out));
    EXPECT_TRUE(wait_until([&] { return lim.stats().in_use == 0; })) << "the permit was kept";
    EXPECT_EQ(seen_->frames_gone.load(), 1);
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
    // The connection and the permit serve the next request.
    ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
    auto r2 = c.read_response();
    ASSERT_TRUE(r2) << c.error();
    EXPECT_EQ(r2->status, 503);
}

TEST_P(coroutine_timeout_rearm_test, a_listener_that_completes_answers_and_the_waiting_frame_is_destroyed) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    add_route(lim, on_timeout_does::complete, milliseconds(10'000));
    srv().start();
    test_client c(srv().port(), milliseconds(3000));
    ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "from the listener");
    EXPECT_TRUE(wait_until([&] { return seen_->frames_gone.load() == 1; }));
    EXPECT_EQ(seen_->finished.load(), 0) << "someone else completed: the frame is destroyed, not resumed";
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_TRUE(wait_until([&] { return lim.stats().in_use == 0; })) << "the permit was kept";
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
}

SLUICE_BACKEND_SUITE(coroutine_timeout_rearm_test);

} // namespace
} // namespace sluice::test
