// Lingering close (RFC 9112 §9.6, nginx's lingering_close) on every backend × dispatch mode ×
// {plain, tls}: when the last response leaves the client's input unread, the server shuts its
// sending side and reads and drops input for a while, rather than close at once. Closing with
// unread input makes Linux reset the connection, and the reset throws away whatever of the
// response is still in the server's send buffer, and fails the client's sending.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// Larger than the kernel's send buffer can hold, so that much of it is still there when the
// server's last send completes.
constexpr std::size_t big_body = std::size_t{8} << 20;

class lingering_close_test : public backend_test {
protected:
    void add_routes() {
        srv().config().limits.max_body_bytes = 1024;
        srv().route("GET", "/big", [](exchange& ex) { ex.response().text(std::string(big_body, 'b')); });
        srv().route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
        srv().route("POST", "/", [](exchange& ex) { ex.response().text("posted"); });
    }

    /// A POST whose declared body is over the limit, with `sent` bytes of it.
    static std::string oversized_post(std::size_t sent) {
        return "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 10000000\r\n\r\n" + std::string(sent, 'x');
    }

    /// Sends 8 x 64 KiB more of the refused body: each send must succeed (no reset).
    static void send_more_body(test_client& c) {
        for (int i = 0; i < 8; ++i) {
            ASSERT_TRUE(c.send(std::string(64 * 1024, 'x')))
                << "after the 413, piece " << i << ": " << c.error();
        }
    }

    /// Gets a 413 on c while its body is still coming (`sent` bytes of it are out).
    static void expect_413(test_client& c, std::size_t sent = 64 * 1024) {
        ASSERT_TRUE(c.send(oversized_post(sent))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 413);
    }
};

TEST_P(lingering_close_test, a_client_still_sending_after_a_413_is_read_not_reset) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    expect_413(c);
    // The rest of the body goes out without a reset (no EPIPE / ECONNRESET): the server reads
    // and drops it, and its end of the response is a FIN.
    send_more_body(c);
    if (HasFatalFailure()) {
        return;
    }
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_lingering == 1; }))
        << "connections_lingering = " << srv().stats().connections_lingering;
    c.shutdown_write();
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_EQ(c.buffered(), "");
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
        << "connections_open = " << srv().stats().connections_open;
    EXPECT_EQ(srv().stats().connections_lingering, 0U);
}

TEST_P(lingering_close_test, one_connection_thread_lingers_too) {
    // On the blocking backend a single thread is taken by the connection itself: that alone is
    // no reason to skip lingering (only a connection waiting for a thread is). Reactor rows
    // ignore the setting.
    srv().config().blocking.threads = 1;
    add_routes();
    srv().start();
    test_client c(srv().port());
    expect_413(c);
    send_more_body(c);
    if (HasFatalFailure()) {
        return;
    }
    c.shutdown_write();
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

TEST_P(lingering_close_test, a_large_last_response_ahead_of_pipelined_requests_arrives_whole) {
    // The client pipelines requests behind one that closes the connection, more than the
    // connection buffers (64 KiB), so that some are still unread in the kernel when the last
    // response is; and it reads through a small receive buffer, so that when the server's last
    // send completes, much of the body is still in the server's send buffer, which a reset
    // discards.
    add_routes();
    srv().start();
    test_client c(srv().port(), default_timeout, client_transport::automatic, client_handshake::at_connect,
                  {.rcvbuf = 16 * 1024});
    std::string bytes = get_request("/big", "Connection: close\r\n");
    while (bytes.size() < 160 * 1024) {
        bytes += get_request("/next");
    }
    ASSERT_TRUE(c.send(bytes)) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.size(), big_body);
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_EQ(c.buffered(), "") << "the pipelined requests are not answered";
}

TEST_P(lingering_close_test, a_client_that_never_ends_its_side_is_closed_after_the_timeout) {
    srv().config().limits.lingering_timeout_ms = 300;
    add_routes();
    srv().start();
    test_client c(srv().port());
    expect_413(c);
    EXPECT_TRUE(c.wait_closed()) << "the server's FIN: " << c.error();
    // The client keeps its socket open and sends nothing more: the server closes anyway.
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
        << "connections_open = " << srv().stats().connections_open
        << ", lingering = " << srv().stats().connections_lingering;
}

TEST_P(lingering_close_test, zero_turns_it_off) {
    srv().config().limits.lingering_timeout_ms = 0;
    add_routes();
    srv().start();
    test_client c(srv().port());
    // The head alone: with body bytes unread, the close would reset the 413 away, which is what
    // zero asks for and what would make this test flaky.
    expect_413(c, 0);
    // Well within the default lingering timeout (5 s), which would keep the connection open.
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }, milliseconds(2'000)))
        << "connections_open = " << srv().stats().connections_open;
    EXPECT_EQ(srv().stats().connections_lingering, 0U);
}

TEST_P(lingering_close_test, a_close_with_nothing_unread_does_not_linger) {
    // The usual Connection: close: the client sent nothing more, so there is nothing to wait
    // for, and the server closes at once although the client keeps its socket open.
    srv().config().limits.lingering_timeout_ms = 60'000;
    add_routes();
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/next", "Connection: close\r\n"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "next");
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
        << "connections_open = " << srv().stats().connections_open
        << ", lingering = " << srv().stats().connections_lingering;
}

TEST_P(lingering_close_test, stop_waits_for_a_lingering_connection_until_the_drain_ends) {
    // A lingering connection is one whose response may still be on its way: the drain waits for
    // it as for a request in progress, but not past shutdown_timeout_ms.
    srv().config().limits.lingering_timeout_ms = 60'000;
    srv().config().shutdown_timeout_ms = 500;
    add_routes();
    srv().start();
    test_client c(srv().port());
    expect_413(c);
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_lingering == 1; }))
        << "connections_lingering = " << srv().stats().connections_lingering;
    const auto from = test_clock::now();
    srv().stop();
    const auto took = test_clock::now() - from;
    EXPECT_GE(took, milliseconds(400)) << "the drain did not wait for the lingering connection";
    EXPECT_LT(took, milliseconds(5'000)) << "the lingering timeout (a minute) held the stop";
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

SLUICE_BACKEND_SUITE(lingering_close_test);

} // namespace
} // namespace sluice::test
