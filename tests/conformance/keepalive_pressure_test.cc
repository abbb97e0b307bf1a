// Keep-alive under load (issue 6, defect 10). The thread-per-connection runtime turns keep-
// alive off only under real pressure (most connection threads taken, as Tomcat BIO's 75%
// rule), not whenever a connection momentarily waits for an idle thread; and a response that
// closes under pressure first answers the requests the client already pipelined.
// Also blocking.accept_queue = 0: no connection waits for a thread (defect 11).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class keepalive_pressure_test : public backend_test {
protected:
    void record(std::string what) {
        std::lock_guard lock(mu_);
        failures_.push_back(std::move(what));
    }
    std::vector<std::string> failures() {
        std::lock_guard lock(mu_);
        return failures_;
    }

    std::mutex mu_;
    std::vector<std::string> failures_;
};

TEST_P(keepalive_pressure_test, keep_alive_holds_while_new_connections_arrive) {
    // 4 pipelining clients and a stream of short connections use at most 6 of the 16
    // connection threads: no pressure, so no response may close a keep-alive connection.
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().start();
    const auto port = srv().port();
    constexpr int clients = 4;
    constexpr int batches = 40;
    std::atomic<int> finished{0};
    for (int k = 0; k < clients; ++k) {
        bg_.run([this, port, k, &finished] {
            test_client c(port);
            const std::string batch = get_request("/") + get_request("/") + get_request("/");
            for (int b = 0; b < batches; ++b) {
                if (!c.send(batch)) {
                    record("client " + std::to_string(k) + " send: " + c.error());
                    break;
                }
                auto rs = c.read_responses(3);
                if (rs.size() != 3) {
                    record("client " + std::to_string(k) + " batch " + std::to_string(b) + ": " +
                           std::to_string(rs.size()) + " of 3 answered: " + c.error());
                    break;
                }
                if (rs.back().says_close()) {
                    record("client " + std::to_string(k) + " batch " + std::to_string(b) +
                           ": Connection: close with idle threads");
                    break;
                }
            }
            ++finished;
        });
    }
    int churned = 0;
    while (finished.load() < clients && churned < 400) {
        test_client s(port);
        if (s.send(get_request("/", "Connection: close\r\n"))) {
            (void)s.read_response();
        }
        ++churned;
    }
    EXPECT_TRUE(wait_until([&] { return finished.load() == clients; }, milliseconds(10'000)));
    bg_.join();
    const auto f = failures();
    EXPECT_TRUE(f.empty()) << f.size() << " failures, first: " << (f.empty() ? "" : f.front());
}

// What only the thread-per-connection runtime has: keep-alive pressure and its accept queue.
class blocking_pressure_test : public keepalive_pressure_test {};

TEST_P(blocking_pressure_test, pipelined_requests_are_answered_before_a_pressure_close) {
    // Two threads: A holds one, B the other, C waits for a thread: real pressure.
    srv().config().blocking.threads = 2;
    srv().config().blocking.accept_queue = 4;
    auto c_waiting = std::make_shared<std::atomic<bool>>(false);
    auto first_running = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().route("GET", "/first", [this, c_waiting, first_running](exchange& ex) {
        *first_running = true;
        // Answer B's first request only once C waits in the queue (3 connections open).
        *c_waiting = wait_until([this] { return srv().stats().connections_open >= 3; });
        ex.response().text("first");
    });
    srv().start();
    test_client a(srv().port());
    ASSERT_TRUE(a.send(get_request("/"))) << a.error();
    ASSERT_TRUE(a.read_response()) << a.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 1; }));
    test_client b(srv().port());
    std::string pipelined = get_request("/first");
    for (int i = 0; i < 4; ++i) {
        pipelined += get_request("/");
    }
    ASSERT_TRUE(b.send(pipelined)) << b.error();
    ASSERT_TRUE(wait_until([&] { return first_running->load(); }));
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto rs = b.read_responses(5);
    ASSERT_EQ(rs.size(), 5U) << "pipelined requests dropped: " << b.error();
    EXPECT_TRUE(c_waiting->load()) << "C never waited for a thread";
    EXPECT_EQ(rs[0].body, "first");
    EXPECT_TRUE(rs.back().says_close()) << "no close under pressure";
    EXPECT_TRUE(b.wait_closed()) << b.error();
    // B's thread is free again: C is served.
    auto rc = c.read_response();
    ASSERT_TRUE(rc) << c.error();
    EXPECT_EQ(rc->body, "hi");
}

TEST_P(blocking_pressure_test, accept_queue_zero_closes_a_connection_no_thread_can_take) {
    srv().config().blocking.threads = 1;
    srv().config().blocking.accept_queue = 0;
    auto release = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/hold", [release](exchange& ex) {
        (void)wait_until([&] { return release->load(); });
        ex.response().text("held");
    });
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
    srv().start();
    test_client a(srv().port());
    ASSERT_TRUE(a.send(get_request("/hold"))) << a.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    // The only thread is busy and no connection may wait: B is closed at once, unserved.
    // Over TLS the handshake is B's first send: no thread is there to answer it.
    test_client b(srv().port(), milliseconds(2000), client_transport::automatic,
                  client_handshake::on_first_io);
    (void)b.send(get_request("/"));
    EXPECT_TRUE(b.wait_closed()) << "a connection waited with accept_queue = 0: " << b.error();
    EXPECT_TRUE(b.buffered().empty()) << printable(b.buffered());
    *release = true;
    auto ra = a.read_response();
    ASSERT_TRUE(ra) << a.error();
    EXPECT_EQ(ra->body, "held");
    a.close_clean();
    // The thread is free again (once it has left A's connection): a new connection is served.
    EXPECT_TRUE(wait_until([&] {
        test_client c(srv().port(), milliseconds(1000));
        if (!c.send(get_request("/"))) {
            return false;
        }
        auto rc = c.read_response();
        return rc && rc->body == "hi";
    })) << "no connection served after the thread came free";
}

TEST_P(blocking_pressure_test, accept_queue_bounds_the_connections_waiting) {
    srv().config().blocking.threads = 1;
    srv().config().blocking.accept_queue = 1;
    auto release = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/hold", [release](exchange& ex) {
        (void)wait_until([&] { return release->load(); });
        ex.response().text("held");
    });
    srv().start();
    test_client a(srv().port());
    ASSERT_TRUE(a.send(get_request("/hold"))) << a.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    // Neither B nor C handshakes (over TLS): they are connections the one thread has not taken.
    test_client b(srv().port(), default_timeout, client_transport::automatic, client_handshake::on_first_io);
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 2; })) << "B was not queued";
    test_client c(srv().port(), default_timeout, client_transport::automatic,
                  client_handshake::on_first_io); // beyond the queue: not queued (the acceptor stops)
    EXPECT_FALSE(wait_until([&] { return srv().stats().connections_open > 2; }, milliseconds(300)))
        << "more connections wait than blocking.accept_queue allows";
    *release = true;
    ASSERT_TRUE(a.read_response()) << a.error();
}

SLUICE_BACKEND_SUITE(keepalive_pressure_test);
SLUICE_BACKEND_SUITE_OF(blocking_pressure_test, "blocking");

} // namespace
} // namespace sluice::test
