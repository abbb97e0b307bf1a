// A suspended connection stays watched (DESIGN.md: "No peer spec guarantees this; we do"):
// on every backend × dispatch mode, a client that leaves while its request is suspended
// fires on_error then on_complete, once each, and the exchange is freed.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <thread>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class disconnect_test : public backend_test {
protected:
    void add_hold_route() {
        srv().route("GET", "/hold", [this](exchange& ex) {
            auto ctx = ex.start_async(milliseconds(20'000));
            events_.attach(ctx);
            contexts_.add(ctx);
        });
    }

    /// After a client left: on_error (client_disconnected) then on_complete, once each, and
    /// nothing left alive in the server.
    void expect_error_then_complete() {
        ASSERT_TRUE(events_.wait_for_count(2)) << "events so far: " << events_.sequence();
        std::this_thread::sleep_for(milliseconds(50)); // a duplicate would show up by now
        EXPECT_EQ(events_.sequence(), "error,complete");
        const auto evs = events_.events();
        EXPECT_EQ(evs[0].error, make_error_code(exchange_errc::client_disconnected))
            << evs[0].error.message();
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
            << "connections_open = " << srv().stats().connections_open;
        EXPECT_EQ(srv().stats().exchanges_suspended, 0u);
        EXPECT_FALSE(contexts_.at(0).complete(response(200))) << "the exchange already ended";
    }
};

TEST_P(disconnect_test, reset_while_suspended) {
    add_hold_route();
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/hold"))) << c.error();
    ASSERT_TRUE(srv().wait_suspended(1));
    c.close_abortive();
    expect_error_then_complete();
}

TEST_P(disconnect_test, orderly_close_while_suspended) {
    add_hold_route();
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/hold"))) << c.error();
    ASSERT_TRUE(srv().wait_suspended(1));
    c.close_clean();
    expect_error_then_complete();
}

TEST_P(disconnect_test, client_leaves_while_the_handler_runs_then_it_suspends) {
    // The disconnect arrives before start_async(): the exchange must not wait for its 20 s
    // timeout once it suspends.
    srv().route("GET", "/late", [this](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(150));
        auto ctx = ex.start_async(milliseconds(20'000));
        events_.attach(ctx);
        contexts_.add(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/late"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    c.close_abortive();
    expect_error_then_complete();
}

TEST_P(disconnect_test, client_leaves_while_a_sync_handler_runs) {
    srv().route("GET", "/sync", [](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(150));
        ex.response().text(std::string(100'000, 's'));
    });
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("alive"); });
    srv().start();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/sync"))) << c.error();
        ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
        c.close_abortive();
    }
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
        << "connections_open = " << srv().stats().connections_open;
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "alive");
}

TEST_P(disconnect_test, many_clients_reset_while_suspended) {
    constexpr int clients = 10;
    auto per = std::make_shared<std::array<event_recorder, clients>>();
    srv().route("GET", "/hold/{i}", [per](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(20'000));
        const int i = std::stoi(std::string(ex.request().path_param("i").value_or("0")));
        (*per)[static_cast<std::size_t>(i)].attach(ctx);
    });
    srv().start();
    std::vector<std::unique_ptr<test_client>> cs;
    for (int i = 0; i < clients; ++i) {
        cs.push_back(std::make_unique<test_client>(srv().port()));
        ASSERT_TRUE(cs.back()->send(get_request("/hold/" + std::to_string(i)))) << cs.back()->error();
    }
    ASSERT_TRUE(srv().wait_suspended(clients)) << "suspended: " << srv().stats().exchanges_suspended;
    for (auto& c : cs) {
        c->close_abortive();
    }
    for (int i = 0; i < clients; ++i) {
        const auto& rec = (*per)[static_cast<std::size_t>(i)];
        ASSERT_TRUE(rec.wait_for_count(2)) << "client " << i << ": " << rec.sequence();
    }
    std::this_thread::sleep_for(milliseconds(50));
    for (int i = 0; i < clients; ++i) {
        EXPECT_EQ((*per)[static_cast<std::size_t>(i)].sequence(), "error,complete") << "client " << i;
    }
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
}

TEST_P(disconnect_test, server_keeps_serving_after_disconnects) {
    add_hold_route();
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("alive"); });
    srv().start();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/hold"))) << c.error();
        ASSERT_TRUE(srv().wait_suspended(1));
        c.close_abortive();
    }
    ASSERT_TRUE(srv().wait_exchanges_freed());
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "alive");
}

SLUICE_BACKEND_SUITE(disconnect_test);

} // namespace
} // namespace sluice::test
