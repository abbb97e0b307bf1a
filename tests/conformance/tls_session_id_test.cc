// TLS session resumption by session ID (TLS 1.2 without tickets: clients that do not take
// tickets, and the server-side session cache of docs/tls.md), on every backend × dispatch row
// that speaks TLS. The usual end of a keep-alive connection is the client closing first; the
// session must survive it (RFC 4346 dropped the rule that a connection closed without
// close_notify may not be resumed), as it does on nginx.
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "support/backend_matrix.h"
#include "support/test_certs.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

class tls_session_id_test : public backend_test {};

// Runs an OpenSSL step on a non-blocking socket until it succeeds, fails or the deadline passes.
template <typename Step>
int drive(SSL* ssl, int fd, test_clock::time_point deadline, Step step) {
    int rc = 0;
    while ((rc = step()) <= 0 && test_clock::now() < deadline) {
        const int err = SSL_get_error(ssl, rc);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            return rc;
        }
        pollfd p{fd, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
        ::poll(&p, 1, remaining_ms(deadline));
    }
    return rc;
}

// A TLS 1.2 client that offers no ticket extension: only the server's session cache can resume.
SSL_CTX* id_only_client() {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_load_verify_locations(ctx, shared_test_certs().cert_path().c_str(), nullptr);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    return ctx;
}

enum class client_end { close_notify, fin_only };

TEST_P(tls_session_id_test, a_session_resumes_by_id_after_the_client_closed_first) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    SSL_CTX* ctx = id_only_client();
    for (const client_end end : {client_end::close_notify, client_end::fin_only}) {
        SCOPED_TRACE(end == client_end::close_notify ? "close_notify, then FIN" : "FIN only");
        SSL_SESSION* session = nullptr;
        {
            test_client c(srv().port(), default_timeout, client_transport::plain);
            ASSERT_TRUE(c.connected()) << c.error();
            SSL* ssl = SSL_new(ctx);
            SSL_set_fd(ssl, c.fd());
            const auto deadline = test_clock::now() + default_timeout;
            ASSERT_EQ(drive(ssl, c.fd(), deadline, [&] { return SSL_connect(ssl); }), 1);
            ASSERT_EQ(SSL_session_reused(ssl), 0);
            const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
            ASSERT_EQ(drive(ssl, c.fd(), deadline,
                            [&] { return SSL_write(ssl, get.data(), static_cast<int>(get.size())); }),
                      static_cast<int>(get.size()));
            std::string got;
            char buf[512];
            while (got.find("hello") == std::string::npos && test_clock::now() < deadline) {
                const int n = drive(ssl, c.fd(), deadline, [&] { return SSL_read(ssl, buf, sizeof buf); });
                ASSERT_GT(n, 0) << "no response";
                got.append(buf, static_cast<std::size_t>(n));
            }
            ASSERT_NE(got.find("hello"), std::string::npos);
            session = SSL_get1_session(ssl);
            // The client ends the keep-alive connection first; the server sees the end and closes.
            if (end == client_end::close_notify) {
                SSL_shutdown(ssl);
            }
            ::shutdown(c.fd(), SHUT_WR);
            ASSERT_TRUE(c.wait_closed()) << c.error();
            // Without this the client's own SSL_free would mark the session not resumable (it
            // sent no close_notify): the test is about the server's cache, so keep it here.
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
            SSL_free(ssl);
        }
        // The server has freed its side of the connection (and with it, its hold on the session).
        ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
        ASSERT_NE(session, nullptr);
        test_client again(srv().port(), default_timeout, client_transport::plain);
        ASSERT_TRUE(again.connected()) << again.error();
        SSL* ssl = SSL_new(ctx);
        SSL_set_session(ssl, session);
        SSL_set_fd(ssl, again.fd());
        ASSERT_EQ(
            drive(ssl, again.fd(), test_clock::now() + default_timeout, [&] { return SSL_connect(ssl); }), 1);
        EXPECT_EQ(SSL_session_reused(ssl), 1) << "the server's session cache lost the session";
        SSL_free(ssl);
        SSL_SESSION_free(session);
    }
    SSL_CTX_free(ctx);
    // A client's bare FIN is the usual end of keep-alive on the server's side (a truncation only
    // matters for what ends with the stream, which no request does): a close, not an error.
    for (const auto& line : srv().log().lines()) {
        EXPECT_TRUE(line.level != log_level::error && line.level != log_level::warn) << line.text;
    }
}

SLUICE_TLS_BACKEND_SUITE(tls_session_id_test);

} // namespace
} // namespace sluice::test
