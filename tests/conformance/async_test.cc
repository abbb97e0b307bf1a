// The async contract on every backend × dispatch mode (DESIGN.md, "Async context contract"):
// complete and resume from other threads, the deferral rule, timeouts and their listeners,
// and handlers or listeners that throw.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(test_clock::now().time_since_epoch()).count();
}

using async_test = backend_test;

TEST_P(async_test, complete_from_another_thread) {
    srv().route("GET", "/a", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(20));
            EXPECT_TRUE(ctx.complete(response(200).text("done elsewhere")));
        });
    });
    srv().start();
    auto r = fetch("/a");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "done elsewhere");
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(events_.sequence(), "complete");
    EXPECT_FALSE(events_.events()[0].error) << events_.events()[0].error.message();
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(async_test, complete_without_a_response_sends_what_the_handler_left) {
    srv().route("GET", "/a", [this](exchange& ex) {
        ex.response().status(202).header("X-From", "handler").text("prepared by the handler");
        auto ctx = ex.start_async(milliseconds(5000));
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(10));
            ctx.complete();
        });
    });
    srv().start();
    auto r = fetch("/a");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 202);
    EXPECT_EQ(r->header("X-From"), "handler");
    EXPECT_EQ(r->body, "prepared by the handler");
}

TEST_P(async_test, complete_inside_the_handler_takes_effect_on_return) {
    srv().route("GET", "/a", [](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        EXPECT_TRUE(ctx.complete(response(201).text("same thread")));
        EXPECT_FALSE(ctx.complete(response(500))) << "the first complete() already won";
    });
    srv().start();
    auto r = fetch("/a");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "same thread");
}

TEST_P(async_test, resume_style_runs_the_handler_again_with_attributes) {
    auto dispatches = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/r", [this, dispatches](exchange& ex) {
        ++*dispatches;
        if (ex.is_resumed()) {
            EXPECT_FALSE(ex.is_initial());
            EXPECT_FALSE(ex.is_async_started());
            ex.response().text(ex.attribute<std::string>("result").value_or("missing") + "/" +
                               ex.attribute<std::string>("from-handler").value_or("missing"));
            return;
        }
        EXPECT_TRUE(ex.is_initial());
        ex.set_attribute("from-handler", std::string("h"));
        auto ctx = ex.start_async(milliseconds(5000));
        EXPECT_TRUE(ex.is_async_started());
        bg_.run([ctx]() mutable {
            // Attributes are the channel both ways.
            EXPECT_EQ(ctx.attribute<std::string>("from-handler"), "h");
            ctx.set_attribute("result", std::string("from-thread"));
            EXPECT_TRUE(ctx.resume());
        });
    });
    srv().start();
    auto r = fetch("/r");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "from-thread/h");
    EXPECT_EQ(dispatches->load(), 2);
}

TEST_P(async_test, resume_several_times_then_complete) {
    srv().route("GET", "/r", [this](exchange& ex) {
        const int round = ex.attribute<int>("round").value_or(0);
        ex.set_attribute("round", round + 1);
        if (round == 3) {
            ex.response().text("rounds=" + std::to_string(round));
            return;
        }
        auto ctx = ex.start_async(milliseconds(5000));
        bg_.run([ctx]() mutable { ctx.resume(); });
    });
    srv().start();
    auto r = fetch("/r");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "rounds=3");
}

TEST_P(async_test, complete_before_the_handler_returns_is_deferred) {
    // The handler sees complete() succeed on another thread, then keeps working for 50 ms and
    // writes the response: the response must be sent after it returns, with what it wrote.
    struct state {
        std::atomic<std::int64_t> returned_ns{0};
        std::atomic<std::int64_t> on_complete_ns{0};
        std::atomic<bool> completed{false};
    };
    auto st = std::make_shared<state>();
    srv().route("GET", "/d", [this, st](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        ctx.on_complete([st](const async_event&) { st->on_complete_ns = now_ns(); });
        bg_.run([ctx, st]() mutable { st->completed = ctx.complete(); });
        EXPECT_TRUE(wait_until([&] { return st->completed.load(); }, milliseconds(2000)));
        std::this_thread::sleep_for(milliseconds(50));
        ex.response().status(200).text("written after complete()");
        st->returned_ns = now_ns();
    });
    srv().start();
    const auto from = test_clock::now();
    auto r = fetch("/d");
    ASSERT_TRUE(r);
    EXPECT_GE(test_clock::now() - from, milliseconds(50));
    EXPECT_EQ(r->body, "written after complete()");
    ASSERT_TRUE(wait_until([&] { return st->on_complete_ns.load() != 0; }));
    EXPECT_GE(st->on_complete_ns.load(), st->returned_ns.load())
        << "on_complete ran before the handler returned";
}

TEST_P(async_test, resume_before_the_handler_returns_never_runs_it_concurrently) {
    struct state {
        std::atomic<int> active{0};
        std::atomic<int> dispatches{0};
        std::atomic<bool> overlapped{false};
        std::atomic<bool> resumed{false};
    };
    auto st = std::make_shared<state>();
    srv().route("GET", "/d", [this, st](exchange& ex) {
        if (st->active.fetch_add(1) != 0) {
            st->overlapped = true;
        }
        ++st->dispatches;
        if (ex.is_resumed()) {
            ex.response().text("second dispatch");
        } else {
            auto ctx = ex.start_async(milliseconds(5000));
            bg_.run([ctx, st]() mutable { st->resumed = ctx.resume(); });
            EXPECT_TRUE(wait_until([&] { return st->resumed.load(); }, milliseconds(2000)));
            std::this_thread::sleep_for(milliseconds(50));
        }
        st->active.fetch_sub(1);
    });
    srv().start();
    auto r = fetch("/d");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "second dispatch");
    EXPECT_EQ(st->dispatches.load(), 2);
    EXPECT_FALSE(st->overlapped.load()) << "the resumed dispatch ran while the first was still running";
}

TEST_P(async_test, timeout_sends_503_after_on_timeout_then_on_complete) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        events_.attach(ctx);
    });
    srv().start();
    const auto from = test_clock::now();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_GE(test_clock::now() - from, milliseconds(90));
    ASSERT_TRUE(events_.wait_for_count(2));
    std::this_thread::sleep_for(milliseconds(100)); // nothing more may arrive
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    const auto evs = events_.events();
    EXPECT_EQ(evs[0].error, make_error_code(exchange_errc::timed_out));
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(async_test, default_timeout_comes_from_the_config) {
    srv().config().async_timeout_ms = 100;
    srv().route("GET", "/t", [](exchange& ex) { (void)ex.start_async(); });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
}

TEST_P(async_test, route_can_choose_504_for_its_timeout) {
    srv().route("GET", "/t", [](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        EXPECT_TRUE(ctx.set_timeout_status(504));
        EXPECT_FALSE(ctx.set_timeout_status(404)) << "only 5xx statuses are allowed";
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 504);
}

TEST_P(async_test, on_timeout_listener_may_complete_with_its_own_response) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([](const async_event& ev) {
            auto c = ev.context;
            EXPECT_TRUE(c.complete(response(200).text("fallback from on_timeout")));
        });
        events_.attach(ctx);
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "fallback from on_timeout");
    ASSERT_TRUE(events_.wait_for_count(2));
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
}

TEST_P(async_test, on_timeout_listener_may_resume) {
    srv().route("GET", "/t", [](exchange& ex) {
        if (ex.is_resumed()) {
            ex.response().text("resumed after timeout");
            return;
        }
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([](const async_event& ev) {
            auto c = ev.context;
            EXPECT_TRUE(c.resume());
        });
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "resumed after timeout");
}

TEST_P(async_test, set_timeout_restarts_the_clock) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        bg_.run([ctx]() mutable {
            EXPECT_TRUE(ctx.set_timeout(milliseconds(3000)));
            std::this_thread::sleep_for(milliseconds(250));
            EXPECT_TRUE(ctx.complete(response(200).text("in time")));
        });
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "in time");
}

TEST_P(async_test, zero_timeout_means_none) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(0));
        bg_.run([ctx]() mutable {
            std::this_thread::sleep_for(milliseconds(200));
            EXPECT_TRUE(ctx.complete(response(200).text("no timeout")));
        });
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
}

TEST_P(async_test, complete_after_timeout_returns_false_and_sends_nothing) {
    srv().route("GET", "/t", [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(100))); });
    srv().route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/t"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    auto ctx = contexts_.at(0);
    EXPECT_TRUE(ctx.is_done());
    EXPECT_FALSE(ctx.complete(response(200).text("too late")));
    EXPECT_FALSE(ctx.resume());
    EXPECT_EQ(c.read_for(milliseconds(150)), 0u) << "stray bytes: " << printable(c.buffered());
    ASSERT_TRUE(c.send(get_request("/next"))) << c.error();
    auto next = c.read_response();
    ASSERT_TRUE(next) << c.error();
    EXPECT_EQ(next->body, "next");
}

TEST_P(async_test, double_complete_sends_one_response) {
    struct state {
        std::atomic<int> first{-1};
        std::atomic<int> second{-1};
    };
    auto st = std::make_shared<state>();
    srv().route("GET", "/c", [this, st](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        bg_.run([ctx, st]() mutable {
            st->first = ctx.complete(response(200).text("first")) ? 1 : 0;
            st->second = ctx.complete(response(201).text("second")) ? 1 : 0;
        });
    });
    srv().route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/c"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "first");
    ASSERT_TRUE(wait_until([&] { return st->second.load() != -1; }));
    EXPECT_EQ(st->first.load(), 1);
    EXPECT_EQ(st->second.load(), 0);
    EXPECT_EQ(c.read_for(milliseconds(100)), 0u) << "stray bytes: " << printable(c.buffered());
    ASSERT_TRUE(c.send(get_request("/next"))) << c.error();
    auto next = c.read_response();
    ASSERT_TRUE(next) << c.error();
    EXPECT_EQ(next->body, "next");
    EXPECT_EQ(events_.count(async_event_kind::complete), 1u);
}

TEST_P(async_test, set_timeout_inside_the_handler_applies_when_it_returns) {
    srv().route("GET", "/t", [](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(20'000));
        EXPECT_TRUE(ctx.set_timeout(milliseconds(100)));
    });
    srv().start();
    const auto from = test_clock::now();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_LT(test_clock::now() - from, milliseconds(3000));
}

TEST_P(async_test, second_start_async_in_one_dispatch_is_the_same_context) {
    srv().route("GET", "/s", [](exchange& ex) {
        auto a = ex.start_async(milliseconds(5000));
        auto b = ex.start_async(milliseconds(5000));
        EXPECT_EQ(a.state(), b.state());
        EXPECT_TRUE(b.complete(response(200).text("via b")));
        EXPECT_FALSE(a.complete(response(500)));
    });
    srv().start();
    auto r = fetch("/s");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "via b");
}

TEST_P(async_test, handler_that_throws_after_start_async_ends_with_500_and_listeners) {
    srv().route("GET", "/x", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        contexts_.add(ctx);
        throw std::runtime_error("thrown after start_async");
    });
    srv().start();
    auto r = fetch("/x");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::handler_threw));
    EXPECT_FALSE(contexts_.at(0).complete(response(200)));
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(async_test, resumed_handler_that_throws_gives_500) {
    srv().route("GET", "/x", [this](exchange& ex) {
        if (ex.is_resumed()) {
            throw std::runtime_error("thrown on resume");
        }
        auto ctx = ex.start_async(milliseconds(5000));
        bg_.run([ctx]() mutable { ctx.resume(); });
    });
    srv().start();
    auto r = fetch("/x");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(async_test, listener_that_throws_is_logged_and_the_exchange_still_ends) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        ctx.on_timeout([](const async_event&) { throw std::runtime_error("listener boom"); });
        events_.attach(ctx);
    });
    srv().start();
    auto r = fetch("/t");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    ASSERT_TRUE(events_.wait_for_count(2));
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_TRUE(srv().log().wait_for("listener boom"));
}

TEST_P(async_test, calls_from_inside_on_complete_are_refused) {
    auto refused = std::make_shared<std::atomic<int>>(-1);
    srv().route("GET", "/c", [this, refused](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        ctx.on_complete([refused](const async_event& ev) {
            auto c = ev.context;
            const bool any = c.complete(response(500)) || c.resume() || c.set_timeout(milliseconds(5));
            *refused = any ? 0 : 1;
        });
        bg_.run([ctx]() mutable { ctx.complete(response(200).text("done")); });
    });
    srv().start();
    auto r = fetch("/c");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "done");
    ASSERT_TRUE(wait_until([&] { return refused->load() != -1; }));
    EXPECT_EQ(refused->load(), 1) << "on_complete is terminal: nothing may succeed from inside it";
}

SLUICE_BACKEND_SUITE(async_test);

} // namespace
} // namespace sluice::test
