// What only TLS has, on every backend × dispatch row that speaks it: a handshake that arrives in
// pieces, hostile or confused peers (plaintext to the TLS port, garbage, a client that stops
// mid-handshake), close_notify, renegotiation; each ends in a clean close, never a crash,
// a hang or a leaked descriptor.
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "support/backend_matrix.h"
#include "support/open_fds.h"
#include "support/test_certs.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class tls_test : public backend_test {
protected:
    void start_hello() {
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().start();
    }
};

// The ClientHello an OpenSSL client sends first, made without a socket (memory BIOs).
std::string client_hello(SSL* ssl) {
    BIO* rbio = BIO_new(BIO_s_mem());
    BIO* wbio = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_connect_state(ssl);
    SSL_do_handshake(ssl); // WANT_READ, with the ClientHello in wbio
    char* data = nullptr;
    const long n = BIO_get_mem_data(wbio, &data);
    std::string hello(data, static_cast<std::size_t>(n));
    return hello;
}

TEST_P(tls_test, a_client_hello_split_at_every_byte_boundary_completes_the_handshake) {
    start_hello();
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    ASSERT_EQ(SSL_CTX_load_verify_locations(ctx, shared_test_certs().cert_path().c_str(), nullptr), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    SSL* probe = SSL_new(ctx);
    const std::size_t size = client_hello(probe).size();
    SSL_free(probe);
    ASSERT_GT(size, 100U);
    for (std::size_t cut = 1; cut < size; ++cut) {
        test_client c(srv().port(), default_timeout, client_transport::plain);
        ASSERT_TRUE(c.connected()) << c.error();
        SSL* ssl = SSL_new(ctx);
        const std::string hello = client_hello(ssl);
        // Two segments, cut at `cut`; the server must wait for the rest without failing.
        ASSERT_TRUE(c.send_split(hello, cut, milliseconds(1))) << c.error();
        // The handshake goes on over the socket (the memory BIOs hold nothing unread).
        SSL_set_fd(ssl, c.fd());
        const auto deadline = test_clock::now() + default_timeout;
        int rc = 0;
        while ((rc = SSL_do_handshake(ssl)) != 1 && test_clock::now() < deadline) {
            const int err = SSL_get_error(ssl, rc);
            ASSERT_TRUE(err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) << "cut at " << cut;
            pollfd p{c.fd(), static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
            ::poll(&p, 1, remaining_ms(deadline));
        }
        ASSERT_EQ(rc, 1) << "handshake with the ClientHello cut at byte " << cut << " of " << size;
        SSL_free(ssl);
    }
    SSL_CTX_free(ctx);
}

TEST_P(tls_test, a_client_that_stops_mid_handshake_is_closed_at_the_handshake_timeout) {
    srv().config().tls.handshake_timeout_ms = 200;
    srv().config().limits.header_timeout_ms = 60'000; // only the TLS clock may act
    start_hello();
    test_client c(srv().port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(std::string("\x16\x03\x01\x02\x00\x01", 6))); // a ClientHello's first bytes
    const auto start = test_clock::now();
    ASSERT_TRUE(c.wait_closed()) << c.error();
    EXPECT_GE(test_clock::now() - start, milliseconds(150));
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_test, plaintext_http_to_the_tls_port_gets_400_then_a_close_and_the_server_goes_on) {
    start_hello();
    // Whole, and with the request line cut inside the method (the first bytes of the connection
    // decide, whichever read brings them); methods OpenSSL itself does not recognise included.
    const std::vector<std::pair<std::string, std::size_t>> cases = {
        {get_request("/"), 0},
        {"DELETE /x HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        {"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 0},
        {get_request("/"), 2},
        {"POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", 5},
    };
    for (const auto& [request, cut] : cases) {
        test_client plain(srv().port(), default_timeout, client_transport::plain);
        ASSERT_TRUE(plain.connected()) << plain.error();
        ASSERT_TRUE(cut == 0 ? plain.send(request) : plain.send_split(request, cut, milliseconds(20)));
        auto r = plain.read_response();
        ASSERT_TRUE(r) << request << ": " << plain.error();
        EXPECT_EQ(r->status, 400) << request;
        EXPECT_EQ(r->header("Connection"), "close") << request;
        EXPECT_NE(r->body.find("HTTPS"), std::string::npos) << r->body;
        ASSERT_TRUE(plain.wait_closed()) << request << ": " << plain.error();
        EXPECT_EQ(plain.buffered().find("hello"), std::string::npos) << "plaintext served on a TLS port";
    }
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
    test_client c(srv().port());
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(get_request("/")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "hello");
}

TEST_P(tls_test, a_plaintext_client_that_stays_after_the_400_is_closed_at_the_handshake_timeout) {
    srv().config().tls.handshake_timeout_ms = 300;
    srv().config().limits.header_timeout_ms = 60'000; // only the TLS clock may act
    start_hello();
    test_client plain(srv().port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(plain.connected()) << plain.error();
    ASSERT_TRUE(plain.send(get_request("/")));
    auto r = plain.read_response();
    ASSERT_TRUE(r) << plain.error();
    EXPECT_EQ(r->status, 400);
    // The client neither closes nor stops sending: its bytes are dropped, and the connection
    // ends when the handshake's time is up.
    ASSERT_TRUE(plain.send(std::string(64 * 1024, 'x')));
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_test, bytes_that_are_neither_tls_nor_a_request_line_get_no_answer) {
    start_hello();
    for (const std::string junk :
         {"get / HTTP/1.1\r\n\r\n", "GETTINGLONG / HTTP/1.1\r\n\r\n", "\x80\x01garbage-bytes"}) {
        test_client c(srv().port(), default_timeout, client_transport::plain);
        ASSERT_TRUE(c.connected()) << c.error();
        ASSERT_TRUE(c.send(junk));
        ASSERT_TRUE(c.wait_closed()) << c.error();
        EXPECT_EQ(c.buffered().find("HTTP/1.1"), std::string::npos) << junk << " answered: " << c.buffered();
    }
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_test, a_garbage_client_hello_is_closed) {
    start_hello();
    test_client c(srv().port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(std::string("\x16\x03\x01\x00\x10garbage-garbage!", 21)));
    ASSERT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_test, descriptors_return_to_baseline_after_many_failed_handshakes) {
    start_hello();
    // Warm up what stays allocated (threads, pools) before taking the baseline.
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.connected()) << c.error();
    }
    ASSERT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
    const std::size_t baseline = open_fds();
    for (int i = 0; i < 300; ++i) {
        test_client c(srv().port(), default_timeout, client_transport::plain);
        ASSERT_TRUE(c.connected()) << c.error();
        if (i % 3 == 0) {
            ASSERT_TRUE(c.send(std::string("\x16\x03\x01\x00\x04junk", 9)));
            ASSERT_TRUE(c.wait_closed()) << c.error();
        } else if (i % 3 == 1) {
            ASSERT_TRUE(c.send(get_request("/"))); // plaintext: a 400, then the close
            ASSERT_TRUE(c.wait_closed()) << c.error();
        } else {
            c.close_abortive(); // gone before the handshake
        }
    }
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0 && open_fds() <= baseline; }))
        << open_fds() << " descriptors open, " << baseline << " before";
}

TEST_P(tls_test, the_server_sends_close_notify_when_it_closes) {
    start_hello();
    test_client c(srv().port());
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(get_request("/", "Connection: close\r\n")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    ASSERT_TRUE(c.wait_closed()) << c.error();
    EXPECT_NE(SSL_get_shutdown(c.tls()->native()) & SSL_RECEIVED_SHUTDOWN, 0)
        << "closed without close_notify";
}

TEST_P(tls_test, a_truncated_stream_and_a_clean_close_notify_both_free_the_connection) {
    start_hello();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHo"));
        c.close_abortive();
    }
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/")));
        ASSERT_TRUE(c.read_response()) << c.error();
        c.close_clean(); // close_notify, then FIN
    }
    EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }));
}

TEST_P(tls_test, renegotiation_is_refused_and_the_server_goes_on) {
    start_hello();
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); // TLS 1.3 has no renegotiation
    test_client c(srv().port(), default_timeout, client_transport::plain);
    ASSERT_TRUE(c.connected()) << c.error();
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, c.fd());
    const auto deadline = test_clock::now() + default_timeout;
    auto drive = [&](auto step) {
        int rc = 0;
        while ((rc = step()) <= 0 && test_clock::now() < deadline) {
            const int err = SSL_get_error(ssl, rc);
            if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
                return rc;
            }
            pollfd p{c.fd(), static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
            ::poll(&p, 1, remaining_ms(deadline));
        }
        return rc;
    };
    ASSERT_EQ(drive([&] { return SSL_connect(ssl); }), 1);
    ASSERT_EQ(SSL_renegotiate(ssl), 1);
    const int rc = drive([&] { return SSL_do_handshake(ssl); });
    // The server answers no_renegotiation; the client gives up or carries on without one.
    EXPECT_TRUE(rc != 1 || SSL_renegotiate_pending(ssl) == 1 ||
                SSL_get_secure_renegotiation_support(ssl) == 0);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    test_client again(srv().port());
    ASSERT_TRUE(again.send(get_request("/")));
    auto r = again.read_response();
    ASSERT_TRUE(r) << again.error();
    EXPECT_EQ(r->status, 200);
}

TEST_P(tls_test, a_slow_reader_of_a_large_response_gets_it_whole) {
    // The ciphertext of one send goes out before more is encrypted: a partial inner send is
    // reported as 0 and the owner sends again, and that call once encrypted 256 KiB more each
    // time. With a reader slower than 256 KiB per wake-up of the sender (the blocking backend
    // wakes every 250 ms) the queue then grew towards the whole response, and as it never
    // emptied the owner saw no progress and cut the reader at its write deadline. Now the
    // owner sees progress every 256 KiB: the whole response arrives.
    constexpr std::size_t body_bytes = std::size_t{3} << 20;
    srv().route("GET", "/big", [](exchange& ex) { ex.response().text(std::string(body_bytes, 'b')); });
    srv().config().limits.write_timeout_ms = 1000;    // the no-progress bound
    srv().config().limits.min_send_rate = 256u << 10; // the cap: 1 s + 12 s, beyond the reader
    srv().start();
    // Segments of an Ethernet's size and a small receive buffer: the server's send buffer is
    // autotuned small, as towards a distant client, and each wake-up takes a few KiB (on
    // loopback's 64 KiB segments it takes more than 256 KiB, which hid the growth).
    test_client c(srv().port(), default_timeout, client_transport::automatic, client_handshake::at_connect,
                  {.rcvbuf = 16 * 1024, .mss = 1460});
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_TRUE(c.send(get_request("/big"))) << c.error();
    // Up to 16 KiB every 20 ms (~800 KB/s), decrypted.
    std::string got;
    const auto start = test_clock::now();
    const auto complete = [&] {
        const std::size_t head_end = got.find("\r\n\r\n");
        return head_end != std::string::npos && got.size() - head_end - 4 >= body_bytes;
    };
    while (!complete() && !c.peer_closed() && test_clock::now() - start < std::chrono::seconds(30)) {
        got += c.read_available(milliseconds(5));
        std::this_thread::sleep_for(milliseconds(20));
    }
    const std::size_t head_end = got.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << "no response head";
    EXPECT_EQ(got.size() - head_end - 4, body_bytes)
        << "the response was cut after " << got.size() << " bytes, in "
        << std::chrono::duration_cast<milliseconds>(test_clock::now() - start).count() << " ms";
}

SLUICE_TLS_BACKEND_SUITE(tls_test);

// TLS sent to a plaintext port: the server answers 400 or closes; it never crashes.
class tls_to_plain_test : public backend_test {};

TEST_P(tls_to_plain_test, a_tls_client_on_a_plain_port_fails_cleanly) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    test_client tls(srv().port(), milliseconds(2000), client_transport::tls);
    EXPECT_FALSE(tls.connected());
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "hello");
}

std::vector<backend_param> plain_rows() {
    std::vector<backend_param> out;
    for (backend_param& p : backend_matrix()) {
        if (p.wire == wire::plain) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(backends, tls_to_plain_test, ::testing::ValuesIn(plain_rows()), backend_param_name);

} // namespace
} // namespace sluice::test
