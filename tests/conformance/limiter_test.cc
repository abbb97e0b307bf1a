// sluice::limited on every backend × dispatch mode: requests beyond the permits wait
// suspended in FIFO order and run when a permit frees; a full queue or a wait past the
// timeout is 503 with Retry-After; the permit is released exactly once when the exchange
// ends (completed, timed out, thrown, client gone), not when the handler returns.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <sluice/exchange.h>
#include <sluice/limiter.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class limiter_test : public backend_test {
protected:
    /// A limited route whose handler suspends and hands its context to the test (in contexts_),
    /// recording the ?id= of each request it admits, in order, and whether it saw is_initial().
    void hold_route(limiter& lim) {
        srv().route("GET", "/hold", limited(lim, [this](exchange& ex) {
                        {
                            std::lock_guard lock(mu_);
                            admitted_.push_back(ex.request().query_param("id").value_or("?") +
                                                (ex.is_initial() ? "" : "(resumed!)"));
                        }
                        auto ctx = ex.start_async(milliseconds(10'000));
                        contexts_.add(ctx);
                    }));
    }

    std::unique_ptr<test_client> send_hold(const std::string& id) {
        auto c = std::make_unique<test_client>(srv().port());
        EXPECT_TRUE(c->send(get_request("/hold?id=" + id))) << c->error();
        return c;
    }

    std::vector<std::string> admitted() {
        std::lock_guard lock(mu_);
        return admitted_;
    }

    std::mutex mu_;
    std::vector<std::string> admitted_;
};

TEST_P(limiter_test, waiters_run_in_arrival_order_as_permits_free) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    std::vector<std::unique_ptr<test_client>> waiting;
    for (const char* id : {"b", "c", "d"}) {
        waiting.push_back(send_hold(id));
        // One at a time, so that the arrival order is the test's.
        ASSERT_TRUE(wait_until([&] { return lim.stats().queued == waiting.size(); }));
    }
    EXPECT_EQ(lim.stats().in_use, 1u);
    EXPECT_EQ(admitted(), std::vector<std::string>{"a"}) << "a queued request must not run";

    for (std::size_t i = 0; i < 4; ++i) {
        ASSERT_TRUE(contexts_.wait_for(i + 1));
        EXPECT_TRUE(contexts_.at(i).complete(response(200).text("done " + std::to_string(i))));
    }
    ASSERT_TRUE(contexts_.wait_for(4));
    auto ra = a->read_response();
    ASSERT_TRUE(ra) << a->error();
    EXPECT_EQ(ra->body, "done 0");
    for (std::size_t i = 0; i < waiting.size(); ++i) {
        auto r = waiting[i]->read_response();
        ASSERT_TRUE(r) << waiting[i]->error();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "done " + std::to_string(i + 1));
    }
    EXPECT_EQ(admitted(), (std::vector<std::string>{"a", "b", "c", "d"}))
        << "FIFO, and the guarded handler sees a waited request as initial";
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    const auto s = lim.stats();
    EXPECT_EQ(s.queued, 0u);
    EXPECT_EQ(s.granted, 4u);
    EXPECT_EQ(s.max_in_use, 1u);
    EXPECT_EQ(s.rejected + s.timed_out + s.cancelled, 0u);
}

TEST_P(limiter_test, a_full_queue_answers_503_with_retry_after_at_once) {
    limiter lim({.permits = 1,
                 .max_queue = 1,
                 .wait_timeout = milliseconds(10'000),
                 .retry_after = std::chrono::seconds(7)});
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    auto b = send_hold("b");
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
    auto c = send_hold("c");
    auto rc = c->read_response();
    ASSERT_TRUE(rc) << c->error();
    EXPECT_EQ(rc->status, 503);
    EXPECT_EQ(rc->header("Retry-After"), "7");
    EXPECT_EQ(lim.stats().rejected, 1u);

    contexts_.at(0).complete(response(200));
    ASSERT_TRUE(contexts_.wait_for(2));
    contexts_.at(1).complete(response(200));
    auto rb = b->read_response();
    ASSERT_TRUE(rb) << b->error();
    EXPECT_EQ(rb->status, 200);
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
}

TEST_P(limiter_test, a_wait_past_the_timeout_answers_503_with_retry_after) {
    limiter lim({.permits = 1, .max_queue = 2, .wait_timeout = milliseconds(150)});
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    const auto from = test_clock::now();
    auto b = send_hold("b");
    auto rb = b->read_response();
    ASSERT_TRUE(rb) << b->error();
    EXPECT_EQ(rb->status, 503);
    EXPECT_EQ(rb->header("Retry-After"), "1");
    EXPECT_GE(test_clock::now() - from, milliseconds(140));
    auto s = lim.stats();
    EXPECT_EQ(s.timed_out, 1u);
    EXPECT_EQ(s.queued, 0u);
    EXPECT_EQ(s.in_use, 1u) << "a still holds its permit";
    EXPECT_EQ(admitted(), std::vector<std::string>{"a"});

    // The connection stays usable, and the permit is still released once.
    contexts_.at(0).complete(response(200));
    ASSERT_TRUE(a->read_response());
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    auto b2 = send_hold("b2");
    ASSERT_TRUE(contexts_.wait_for(2));
    contexts_.at(1).complete(response(200));
    ASSERT_TRUE(b2->read_response());
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
}

TEST_P(limiter_test, the_permit_is_held_while_suspended_and_released_when_the_async_timeout_ends_it) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    srv().route("GET", "/slow", limited(lim, [this](exchange& ex) {
                    auto ctx = ex.start_async(milliseconds(100));
                    events_.attach(ctx);
                }));
    srv().start();

    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/slow")));
    ASSERT_TRUE(srv().wait_suspended(1));
    EXPECT_EQ(lim.stats().in_use, 1u) << "the handler returned, but the exchange is in flight";
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503) << "the handler's own async timeout";
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_EQ(lim.stats().timed_out, 0u) << "the request did not time out waiting for a permit";
}

TEST_P(limiter_test, a_client_that_leaves_releases_its_permit_and_the_next_waiter_runs) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    auto b = send_hold("b");
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
    a->close_abortive();
    ASSERT_TRUE(contexts_.wait_for(2)) << "b runs once a's exchange ended";
    EXPECT_FALSE(contexts_.at(0).complete(response(200))) << "a's exchange is over";
    EXPECT_EQ(lim.stats().in_use, 1u);
    contexts_.at(1).complete(response(200).text("b"));
    auto rb = b->read_response();
    ASSERT_TRUE(rb) << b->error();
    EXPECT_EQ(rb->body, "b");
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    EXPECT_EQ(lim.stats().granted, 2u);
}

TEST_P(limiter_test, a_queued_client_that_leaves_leaves_the_queue) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    auto b = send_hold("b");
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
    b->close_abortive();
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 0; }));
    EXPECT_EQ(lim.stats().cancelled, 1u);
    contexts_.at(0).complete(response(200));
    ASSERT_TRUE(a->read_response());
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    EXPECT_EQ(admitted(), std::vector<std::string>{"a"}) << "b left before its turn";
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(limiter_test, sync_and_throwing_handlers_release_when_the_exchange_ends) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    srv().route("GET", "/sync", limited(lim, [](exchange& ex) { ex.response().text("ok"); }));
    srv().route("GET", "/throw", limited(lim, [](exchange&) -> void { throw std::runtime_error("boom"); }));
    srv().start();

    test_client c(srv().port());
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(c.send(get_request(i % 2 == 0 ? "/sync" : "/throw")));
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, i % 2 == 0 ? 200 : 500);
        if (r->status == 500) {
            break; // a throwing handler may close the connection
        }
    }
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
    EXPECT_EQ(lim.stats().rejected, 0u) << "one permit is enough for requests one after another";
}

TEST_P(limiter_test, a_resume_style_handler_behind_the_queue_sees_initial_then_resumed) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    hold_route(lim);
    srv().route("GET", "/resume", limited(lim, [](exchange& ex) {
                    if (ex.is_resumed()) {
                        ex.response().text("resumed with " + ex.attribute<std::string>("r").value_or("?"));
                        return;
                    }
                    auto ctx = ex.start_async(milliseconds(5000));
                    ex.executor().post([ctx]() mutable {
                        ctx.set_attribute("r", std::string("result"));
                        ctx.resume();
                    });
                }));
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/resume")));
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
    contexts_.at(0).complete(response(200));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "resumed with result");
    ASSERT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }));
}

TEST_P(limiter_test, stopping_the_server_ends_holders_and_waiters_and_returns_every_permit) {
    limiter lim({.permits = 1, .max_queue = 4, .wait_timeout = milliseconds(10'000)});
    srv().config().shutdown_timeout_ms = 0;
    hold_route(lim);
    srv().start();

    auto a = send_hold("a");
    ASSERT_TRUE(contexts_.wait_for(1));
    auto b = send_hold("b");
    ASSERT_TRUE(wait_until([&] { return lim.stats().queued == 1; }));
    srv().stop();
    const auto s = lim.stats();
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.queued, 0u);
    // The stop ends a and b in either order: b leaves the queue (cancelled), or is handed a's
    // permit and gives it back when its own exchange ends. (On the blocking backend, where b's
    // loop learns of the stop on its own, b's handler may even run before the stop ends it.)
    EXPECT_TRUE((s.cancelled == 1 && s.granted == 1) || (s.cancelled == 0 && s.granted == 2))
        << "cancelled " << s.cancelled << ", granted " << s.granted;
    EXPECT_EQ(admitted().front(), "a");
}

SLUICE_BACKEND_SUITE(limiter_test);

} // namespace
} // namespace sluice::test
