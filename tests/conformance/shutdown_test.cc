// Server stop on every backend × dispatch mode: suspended exchanges end with on_error
// (shutting_down) then on_complete, idle connections close, an in-flight request finishes,
// stop() works from a handler and from several threads at once.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class shutdown_test : public backend_test {
protected:
    /// Runs stop() on a helper thread; false if it has not returned within the deadline.
    bool stop_within(milliseconds deadline) {
        auto done = std::make_shared<std::atomic<bool>>(false);
        bg_.run([this, done] {
            srv().server().stop();
            *done = true;
        });
        return wait_until([&] { return done->load(); }, deadline);
    }
};

TEST_P(shutdown_test, stop_ends_suspended_exchanges_with_shutting_down) {
    constexpr int clients = 3;
    auto per = std::make_shared<std::array<event_recorder, clients>>();
    srv().route("GET", "/hold/{i}", [this, per](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(20'000));
        const int i = std::stoi(std::string(ex.request().path_param("i").value_or("0")));
        (*per)[static_cast<std::size_t>(i)].attach(ctx);
        contexts_.add(ctx);
    });
    srv().start();
    std::vector<std::unique_ptr<test_client>> cs;
    for (int i = 0; i < clients; ++i) {
        cs.push_back(std::make_unique<test_client>(srv().port()));
        ASSERT_TRUE(cs.back()->send(get_request("/hold/" + std::to_string(i)))) << cs.back()->error();
    }
    ASSERT_TRUE(srv().wait_suspended(clients));
    ASSERT_TRUE(stop_within(milliseconds(5000))) << "stop() did not return";
    for (int i = 0; i < clients; ++i) {
        const auto& rec = (*per)[static_cast<std::size_t>(i)];
        ASSERT_TRUE(rec.wait_for_count(2)) << "client " << i << ": " << rec.sequence();
        EXPECT_EQ(rec.sequence(), "error,complete") << "client " << i;
        EXPECT_EQ(rec.events()[0].error, make_error_code(exchange_errc::shutting_down))
            << rec.events()[0].error.message();
        EXPECT_TRUE(cs[static_cast<std::size_t>(i)]->wait_closed())
            << cs[static_cast<std::size_t>(i)]->error();
    }
    for (auto& ctx : contexts_.take_all()) {
        EXPECT_FALSE(ctx.complete(response(200))) << "complete() after stop must be refused";
    }
}

TEST_P(shutdown_test, stop_closes_idle_keepalive_connections) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    ASSERT_TRUE(c.read_response()) << c.error();
    ASSERT_TRUE(stop_within(milliseconds(5000)));
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(c.buffered().empty()) << printable(c.buffered());
}

TEST_P(shutdown_test, connections_are_refused_after_stop) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().start();
    const auto port = srv().port();
    ASSERT_TRUE(stop_within(milliseconds(5000)));
    test_client c(port, milliseconds(1000));
    if (c.connected()) {
        // Accepted by a lingering backlog at most: it must not be served.
        (void)c.send(get_request("/"));
        EXPECT_FALSE(c.read_response()) << "served after stop()";
    }
}

TEST_P(shutdown_test, in_flight_request_finishes_during_stop) {
    srv().route("GET", "/slow", [](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(200));
        ex.response().text("finished");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/slow"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    ASSERT_TRUE(stop_within(milliseconds(5000)));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "finished");
    ASSERT_TRUE(r->header("Connection").has_value());
    EXPECT_TRUE(same_name(*r->header("Connection"), "close"));
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

TEST_P(shutdown_test, exchange_suspending_after_stop_began_ends_at_once) {
    srv().route("GET", "/late", [this](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(200));
        auto ctx = ex.start_async(milliseconds(20'000));
        events_.attach(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/late"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    ASSERT_TRUE(stop_within(milliseconds(5000))) << "stop() waited for the async timeout";
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::shutting_down));
}

TEST_P(shutdown_test, stop_from_a_handler) {
    srv().route("GET", "/quit", [this](exchange& ex) {
        srv().server().stop();
        ex.response().text("bye");
    });
    srv().start();
    auto waited = std::make_shared<std::atomic<bool>>(false);
    bg_.run([this, waited] {
        srv().server().wait();
        *waited = true;
    });
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/quit"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "bye");
    EXPECT_TRUE(wait_until([&] { return waited->load(); })) << "server::wait() did not return";
}

TEST_P(shutdown_test, concurrent_stops_all_return) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().start();
    auto returned = std::make_shared<std::atomic<int>>(0);
    for (int i = 0; i < 4; ++i) {
        bg_.run([this, returned] {
            srv().server().stop();
            ++*returned;
        });
    }
    EXPECT_TRUE(wait_until([&] { return returned->load() == 4; })) << returned->load() << " of 4 returned";
}

SLUICE_BACKEND_SUITE(shutdown_test);

} // namespace
} // namespace sluice::test
