// One server on two ports (tls.listen, docs/tls.md "Plaintext and TLS in one server"): `listen`
// speaks plaintext, `tls.listen` TLS, with the same routes, loops and limits. On every backend ×
// dispatch row: each port answers its own protocol, request::tls() says which one a request
// came over, the other protocol on either port ends cleanly, and the counters see both.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/get_body.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class tls_listen_test : public backend_test {
protected:
    // The rows' server has tls.cert set (the TLS rows): tls.listen moves TLS to a second port.
    void start_both() {
        srv().config().tls.listen = "127.0.0.1:0";
        srv().route("GET", "/", [](exchange& ex) {
            const tls_info* tls = ex.request().tls();
            ex.response().text(tls == nullptr ? "plain" : "tls " + tls->version);
        });
        srv().start();
    }
};

TEST_P(tls_listen_test, one_server_answers_plaintext_on_listen_and_tls_on_tls_listen) {
    start_both();
    const std::uint16_t plain = srv().port();
    const std::uint16_t tls = srv().server().tls_port();
    ASSERT_NE(plain, 0);
    ASSERT_NE(tls, 0);
    ASSERT_NE(plain, tls);
    EXPECT_EQ(get_body(plain, "/", client_transport::plain), "plain");
    EXPECT_EQ(get_body(tls, "/", client_transport::tls).rfind("tls TLSv1.", 0), 0u);
    // Again, interleaved on kept-alive connections: the decision is per connection, made once.
    test_client p(plain, default_timeout, client_transport::plain);
    test_client t(tls, default_timeout, client_transport::tls);
    ASSERT_TRUE(t.connected()) << t.error();
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(p.send(get_request("/"))) << p.error();
        ASSERT_TRUE(t.send(get_request("/"))) << t.error();
        auto rp = p.read_response();
        auto rt = t.read_response();
        ASSERT_TRUE(rp) << p.error();
        ASSERT_TRUE(rt) << t.error();
        EXPECT_EQ(rp->body, "plain");
        EXPECT_NE(rt->body, "plain");
    }
    const server_stats st = srv().stats();
    EXPECT_EQ(st.connections_accepted, 4u);
    EXPECT_EQ(st.requests, 8u);
}

TEST_P(tls_listen_test, with_two_io_threads_every_loop_serves_both_ports) {
    srv().config().io_threads = 2; // two SO_REUSEPORT sockets per address (reactor backends)
    start_both();
    // The kernel spreads connections by hash over each address's group: enough of them reach
    // both loops, and each must speak its port's protocol whichever loop took it.
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(get_body(srv().port(), "/", client_transport::plain), "plain") << i;
        EXPECT_NE(get_body(srv().server().tls_port(), "/", client_transport::tls), "plain") << i;
    }
}

TEST_P(tls_listen_test, plaintext_on_the_tls_port_gets_400) {
    start_both();
    test_client c(srv().server().tls_port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(get_request("/")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 400);
    EXPECT_NE(r->body.find("HTTPS"), std::string::npos) << r->body;
    ASSERT_TRUE(c.wait_closed()) << c.error();
    EXPECT_EQ(get_body(srv().port(), "/", client_transport::plain), "plain");
}

TEST_P(tls_listen_test, tls_on_the_plaintext_port_gets_400_and_a_close_not_a_hang) {
    srv().config().limits.header_timeout_ms = 60'000; // a hang would outlast the test's deadline
    start_both();
    // A ClientHello's first record: not a request line, so a 400 at once, then a close.
    test_client raw(srv().port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(raw.connected()) << raw.error();
    ASSERT_TRUE(raw.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)));
    auto r = raw.read_response();
    ASSERT_TRUE(r) << raw.error();
    EXPECT_EQ(r->status, 400);
    ASSERT_TRUE(raw.wait_closed()) << raw.error();
    // The server's FIN came; it reads on until ours (lingering close, limits.lingering_timeout_ms).
    raw.close_clean();
    // A real TLS client there fails its handshake within its deadline, and the port goes on.
    test_client tls(srv().port(), milliseconds(2000), client_transport::tls);
    EXPECT_FALSE(tls.connected());
    EXPECT_EQ(get_body(srv().port(), "/", client_transport::plain), "plain");
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_listen_test, without_tls_listen_the_one_listener_speaks_tls_and_there_is_no_tls_port) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text(ex.request().tls() ? "tls" : "plain"); });
    srv().start();
    EXPECT_EQ(srv().server().tls_port(), 0);
    EXPECT_EQ(get_body(srv().port(), "/", client_transport::tls), "tls");
}

TEST_P(tls_listen_test, a_tls_listen_address_in_use_is_a_startup_error_naming_it) {
    const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(taken, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(taken, 1), 0);
    ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
    srv().config().tls.listen = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    try {
        srv().start();
        ADD_FAILURE() << "started on an address in use";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "tls.listen") << e.what();
    }
    ::close(taken);
}

SLUICE_TLS_BACKEND_SUITE(tls_listen_test);

} // namespace
} // namespace sluice::test
