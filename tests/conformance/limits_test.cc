// Malformed requests and limits on every backend × dispatch mode: 400, 408, 413, 414, 431,
// each followed by a close (RFC 9112 §9.6: after a bad request there is no way to resync).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

class limits_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("ok"); });
        srv().route("POST", "/", [](exchange& ex) { ex.response().text(std::string(ex.request().body())); });
    }

    /// Sends raw bytes and expects one error response with `status`, then a close.
    void expect_error(std::string_view raw, int status) {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(raw)) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, status) << "for " << printable(raw, 200);
        EXPECT_TRUE(c.wait_closed()) << "after " << status << ": " << c.error();
    }
};

TEST_P(limits_test, bad_header_syntax_is_400) {
    srv().start();
    expect_error("GET / HTTP/1.1\r\nHost: t\r\nNo colon here\r\n\r\n", 400);
}

TEST_P(limits_test, whitespace_before_the_colon_is_400) {
    // RFC 9112 §5.1: a server MUST reject it with 400 (request smuggling).
    srv().start();
    expect_error("GET / HTTP/1.1\r\nHost : t\r\n\r\n", 400);
}

TEST_P(limits_test, bad_request_line_is_400) {
    srv().start();
    expect_error("GET /\r\n\r\n", 400);
}

TEST_P(limits_test, content_length_with_transfer_encoding_is_400) {
    srv().start();
    expect_error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "0\r\n\r\n",
                 400);
}

TEST_P(limits_test, duplicate_content_length_is_400) {
    srv().start();
    expect_error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400);
}

TEST_P(limits_test, conflicting_content_length_is_400) {
    srv().start();
    expect_error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400);
}

TEST_P(limits_test, missing_host_on_http11_is_400) {
    srv().start();
    expect_error("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400);
}

TEST_P(limits_test, http10_without_host_is_fine) {
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET / HTTP/1.0\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
}

TEST_P(limits_test, slow_head_gets_408) {
    srv().config().limits.header_timeout_ms = 200;
    srv().start();
    // Timed from before the connect: the server's deadline cannot start earlier, however long
    // this thread is descheduled between connect, send and read (TSan on a loaded machine).
    const auto from = test_clock::now();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: t\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 408);
    EXPECT_GE(test_clock::now() - from, std::chrono::milliseconds(195));
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

TEST_P(limits_test, slow_head_of_a_keepalive_request_gets_408) {
    srv().config().limits.header_timeout_ms = 200;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    ASSERT_TRUE(c.read_response()) << c.error();
    ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: t\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

TEST_P(limits_test, a_connection_after_a_long_idle_spell_gets_its_whole_header_timeout) {
    // The head deadline of a new connection runs from its arrival, not from whenever the
    // thread or loop that adopts it last looked at the clock: after an idle spell longer than
    // the timeout, a request sent a little after the connect is still answered.
    srv().config().limits.header_timeout_ms = 300;
    srv().config().blocking.threads = 1; // the same connection thread idles, then adopts
    srv().start();
    {
        test_client first(srv().port());
        ASSERT_TRUE(first.send(get_request("/", "Connection: close\r\n"))) << first.error();
        ASSERT_TRUE(first.read_response()) << first.error();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(600)); // twice the timeout, idle
    test_client c(srv().port());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
}

TEST_P(limits_test, trickled_head_still_gets_408_in_time) {
    // A slowloris client: bytes keep coming, but the head deadline runs from the first one.
    srv().config().limits.header_timeout_ms = 300;
    srv().start();
    test_client c(srv().port());
    const auto from = test_clock::now();
    const std::string head = "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
    // One byte every 20 ms would take well over a second; the server must not wait for it.
    (void)c.send_split(head, 1, std::chrono::milliseconds(20));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 408);
    EXPECT_LT(test_clock::now() - from, std::chrono::milliseconds(2000));
}

TEST_P(limits_test, connection_without_a_request_closes_silently_after_header_timeout) {
    srv().config().limits.header_timeout_ms = 200;
    srv().start();
    test_client c(srv().port());
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(c.buffered().empty()) << printable(c.buffered());
}

TEST_P(limits_test, slow_body_gets_408) {
    srv().config().limits.body_timeout_ms = 200;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 408);
}

TEST_P(limits_test, declared_body_too_large_is_413) {
    srv().config().limits.max_body_bytes = 1024;
    srv().start();
    expect_error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n", 413);
}

TEST_P(limits_test, chunked_body_too_large_is_413) {
    srv().config().limits.max_body_bytes = 1024;
    srv().start();
    std::string req = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 3; ++i) {
        req += "200\r\n" + std::string(512, 'x') + "\r\n";
    }
    req += "0\r\n\r\n";
    expect_error(req, 413);
}

TEST_P(limits_test, body_at_the_limit_is_accepted) {
    srv().config().limits.max_body_bytes = 1024;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(body_request("POST", "/", std::string(1024, 'y')))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.size(), 1024u);
}

TEST_P(limits_test, long_target_is_414) {
    srv().config().limits.max_header_bytes = 1024;
    srv().start();
    expect_error(get_request("/" + std::string(2000, 'a')), 414);
}

TEST_P(limits_test, large_headers_are_431) {
    srv().config().limits.max_header_bytes = 1024;
    srv().start();
    std::string extra;
    for (int i = 0; i < 40; ++i) {
        extra += "X-Filler-" + std::to_string(i) + ": " + std::string(40, 'z') + "\r\n";
    }
    expect_error(get_request("/", extra), 431);
}

// RFC 9110 §9.3.2: a response to HEAD has no content, an error's included. A client reading
// the error as the answer to its HEAD would take the text after the head for the next response.
TEST_P(limits_test, an_error_answering_a_head_has_no_body) {
    srv().config().limits.max_header_bytes = 1024;
    srv().config().limits.max_body_bytes = 16;
    srv().start();
    const std::pair<std::string, int> cases[] = {
        {"HEAD / HTTP/1.1\r\nHost: t\r\nNo colon here\r\n\r\n", 400},
        {"HEAD / HTTP/1.1\r\nHost: t\r\nContent-Length: 99\r\n\r\n", 413},
        {"HEAD /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n", 414},
        {"HEAD / HTTP/1.1\r\nHost: t\r\nX: " + std::string(2000, 'z') + "\r\n\r\n", 431},
    };
    for (const auto& [raw, status] : cases) {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(raw)) << c.error();
        ASSERT_TRUE(c.wait_closed()) << status << ": " << c.error();
        const std::string& got = c.buffered();
        EXPECT_EQ(got.rfind("HTTP/1.1 " + std::to_string(status) + " ", 0), 0u) << printable(got, 300);
        EXPECT_NE(got.find("\r\nContent-Length: "), std::string::npos) << "the length a GET would get";
        EXPECT_TRUE(got.ends_with("\r\n\r\n")) << "a body after the head: " << printable(got, 300);
    }
}

TEST_P(limits_test, client_that_never_reads_is_dropped_after_the_write_timeout) {
    srv().config().limits.write_timeout_ms = 300;
    // 8 MiB: twice the most a loopback socket's send buffer grows to (tcp_wmem's 4 MiB), far
    // beyond what the client's 4 KiB receive buffer takes, and cheap enough to build and copy
    // under TSan on a loaded machine (32 MiB once took over 5 s there).
    srv().route("GET", "/huge", [](exchange& ex) { ex.response().text(std::string(8u << 20, 'h')); });
    srv().start();
    test_client c(srv().port());
    // A small receive buffer so that the server's send blocks soon.
    const int small = 4096;
    ::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    ASSERT_TRUE(c.send(get_request("/huge"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    // Without the write timeout the connection would stay open for good: any bound shows it
    // (it closes ~300 ms after the buffers fill; the margin is for sanitizers under load).
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }, std::chrono::seconds(15)))
        << "the stuck connection is still open";
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(limits_test, connections_beyond_max_connections_are_closed_at_once) {
    srv().config().limits.max_connections = 2;
    srv().start();
    std::vector<std::unique_ptr<test_client>> held;
    for (int i = 0; i < 2; ++i) {
        held.push_back(std::make_unique<test_client>(srv().port()));
        ASSERT_TRUE(held.back()->send(get_request("/"))) << held.back()->error();
        ASSERT_TRUE(held.back()->read_response()) << held.back()->error();
    }
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 2; }));
    test_client extra(srv().port());
    if (extra.connected()) {
        (void)extra.send(get_request("/"));
        EXPECT_TRUE(extra.wait_closed()) << "a third connection was kept: " << extra.error();
        EXPECT_TRUE(extra.buffered().empty()) << "and served: " << printable(extra.buffered());
    }
    // Room again once one leaves.
    held.front()->close_clean();
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 1; }));
    test_client again(srv().port());
    ASSERT_TRUE(again.send(get_request("/"))) << again.error();
    auto r = again.read_response();
    ASSERT_TRUE(r) << again.error();
    EXPECT_EQ(r->status, 200);
}

SLUICE_BACKEND_SUITE(limits_test);

} // namespace
} // namespace sluice::test
