// sluice::client to https upstreams, on every backend × dispatch × wire row (the blocking rows
// run their calls on the client's own loop): the upstream is a sluice TLS test server with
// the run's own certificate (tests/support/test_certs.h), or a scripted one that stalls or
// answers in plaintext. Peer verification is on unless a test turns it off.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <sluice/client.h>
#include <sluice/coro.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/error_text.h"
#include "support/fake_upstream.h"
#include "support/log_capture.h"
#include "support/test_certs.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// How the scripted TLS upstream below ends its answer.
enum class upstream_end { close_notify, bare_fin };

// Reads one request and answers 200 with a body that has neither a Content-Length nor chunked
// framing, so only the end of the stream ends it (RFC 9112 §6.3, item 8); then ends the stream
// as `end` says and waits for the client to close.
fake_upstream::script close_delimited_tls(std::string body, upstream_end end) {
    return [body = std::move(body), end](upstream_conn& c) {
        upstream_tls t(c);
        if (!t.read_head() || !t.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body)) {
            return;
        }
        end == upstream_end::close_notify ? t.close_notify() : t.bare_fin();
        (void)c.wait_closed(5s);
    };
}

class client_tls_test : public backend_test {
protected:
    /// A TLS upstream (epoll, one thread) with `certs`, answering GET /x with "secure".
    void start_upstream(const test_certs& certs = shared_test_certs()) {
        upstream_ = std::make_unique<test_server>("epoll", dispatch_mode::inline_io);
        upstream_->config().tls.cert = certs.cert_path();
        upstream_->config().tls.key = certs.key_path();
        upstream_->route("GET", "/x", [](exchange& ex) { ex.response().text("secure"); });
        upstream_->start();
    }

    std::string https_address() const { return "https://127.0.0.1:" + std::to_string(upstream_->port()); }

    /// Trusts the run's CA; logs into log_.
    client_options trusting(client_options o = {}) {
        o.tls.ca_file = shared_test_certs().cert_path();
        return logging(o);
    }

    client_options logging(client_options o) {
        o.log = [this](log_level l, std::string_view text) { log_.record(l, text); };
        return o;
    }

    void make_client(const std::string& address, client_options o) {
        client_ = std::make_unique<client>(upstream({address}), std::move(o));
    }

    /// /cb: callback style on the server's loop; /co: coroutine style.
    void add_routes() {
        srv().route("GET", "/cb", [this](exchange& ex) {
            auto ctx = ex.start_async(10s);
            client_->send(ex.executor(), {.target = "/x"}, [ctx](result<client_response> out) mutable {
                response res;
                if (out) {
                    res.status(out->status).text(out->body);
                } else {
                    res.status(502).text(error_text(out.error()));
                }
                ctx.complete(std::move(res));
            });
        });
        srv().route("GET", "/co", [this](exchange& ex) -> task<> {
            // A named request: GCC destroys a temporary of a co_await's full-expression twice.
            client_request req{.target = "/x"};
            result<client_response> out = co_await client_->async_send(ex.executor(), std::move(req));
            if (out) {
                ex.response().status(out->status).text(out->body);
            } else {
                ex.response().status(502).text(error_text(out.error()));
            }
        });
    }

    http_response call(std::string_view target) {
        test_client c(srv().port(), 10s);
        EXPECT_TRUE(c.send(get_request(target))) << c.error();
        auto r = c.read_response();
        EXPECT_TRUE(r) << c.error();
        return r ? *r : http_response{};
    }

    void TearDown() override {
        backend_test::TearDown();
        client_.reset();
        upstream_.reset();
    }

    std::unique_ptr<test_server> upstream_;
    std::unique_ptr<client> client_;
    log_capture log_;
};

TEST_P(client_tls_test, https_get_in_both_styles) {
    start_upstream();
    make_client(https_address(), trusting());
    add_routes();
    srv().start();
    for (const char* style : {"/cb", "/co"}) {
        auto r = call(style);
        EXPECT_EQ(r.status, 200) << style << " " << r.body;
        EXPECT_EQ(r.body, "secure") << style;
    }
    // One loop, sequential calls: one pooled TLS connection served both.
    EXPECT_EQ(client_->stats().connects, 1u);
    EXPECT_EQ(client_->stats().tls_handshakes, 1u);
}

TEST_P(client_tls_test, untrusted_certificate_is_rejected) {
    start_upstream();
    make_client(https_address(), logging({})); // the system bundle: it does not know the run's CA
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::tls_certificate_rejected));
    EXPECT_EQ(call("/co").body, error_text(client_errc::tls_certificate_rejected));
    EXPECT_TRUE(log_.contains("certificate")) << "the log says why";
    EXPECT_TRUE(log_.contains("127.0.0.1:" + std::to_string(upstream_->port())));
}

TEST_P(client_tls_test, wrong_hostname_is_rejected) {
    start_upstream();
    client_options o = trusting();
    o.tls.server_name = "wrong.example"; // the certificate names localhost and 127.0.0.1
    make_client(https_address(), o);
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::tls_certificate_rejected));
    EXPECT_TRUE(log_.contains("wrong.example"));
}

TEST_P(client_tls_test, verification_off_works_and_warns_once) {
    start_upstream();
    client_options o = logging({});
    o.tls.verify = tls_verify::none;
    make_client(https_address(), o);
    EXPECT_EQ(log_.count("verification is off"), 1u);
    EXPECT_TRUE(log_.contains(https_address()));
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "secure");
    EXPECT_EQ(call("/co").body, "secure");
    EXPECT_EQ(log_.count("verification is off"), 1u);
}

TEST_P(client_tls_test, a_new_pooled_connection_resumes_the_session) {
    start_upstream();
    client_options o = trusting();
    o.max_requests_per_connection = 1; // every call opens a new connection
    make_client(https_address(), o);
    add_routes();
    srv().start();
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(call("/cb").body, "secure") << i;
    }
    const client_stats s = client_->stats();
    EXPECT_EQ(s.connects, 3u);
    EXPECT_EQ(s.tls_handshakes, 3u);
    EXPECT_EQ(s.tls_resumed, 2u) << "the 2nd and 3rd connections resume the 1st's session";
}

TEST_P(client_tls_test, a_stalled_handshake_times_out) {
    fake_upstream up(
        [](upstream_conn& c) { (void)c.wait_closed(5s); }); // reads the ClientHello, never answers
    make_client("https://" + up.address(), trusting({.connect_timeout = 300ms}));
    add_routes();
    srv().start();
    const auto t0 = test_clock::now();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::connect_timed_out));
    EXPECT_LT(test_clock::now() - t0, 3s);
    EXPECT_TRUE(wait_until([&] { return up.closed() == 1; })) << "the client closed the connection";
}

TEST_P(client_tls_test, a_plaintext_upstream_fails_the_handshake) {
    fake_upstream up([](upstream_conn& c) {
        (void)c.write("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    make_client("https://" + up.address(), trusting());
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::tls_handshake_failed));
}

TEST_P(client_tls_test, the_log_sink_never_runs_after_the_client_is_destroyed) {
    start_upstream();
    // A relay in front of the TLS upstream: it passes the ClientHello on and holds back the
    // server's answer (its certificate, which the client rejects: it trusts the system's CAs
    // only) until the test lets it through.
    auto flight_held = std::make_shared<std::atomic<bool>>(false);
    auto let_through = std::make_shared<std::atomic<bool>>(false);
    auto written = std::make_shared<std::atomic<bool>>(false);
    const std::uint16_t tls_port = upstream_->port();
    fake_upstream relay([=](upstream_conn& c) {
        const std::string hello = c.read_some(5s);
        test_client server_side(tls_port, 5s, client_transport::plain);
        if (hello.empty() || !server_side.send(hello)) {
            return;
        }
        std::string flight = server_side.read_available(5s);
        for (std::string more; !(more = server_side.read_available(100ms)).empty();) {
            flight += more;
        }
        *flight_held = true;
        if (!wait_until([&] { return let_through->load(); }, 10s) || !c.write(flight)) {
            return;
        }
        *written = true;
        (void)c.wait_closed(5s);
    });
    // What the sink captures is freed right after ~client, as a user may; `late` outlives it.
    struct sink_state {
        std::atomic<int> lines{0};
    };
    auto* state = new sink_state;
    auto gone = std::make_shared<std::atomic<bool>>(false);
    auto late = std::make_shared<std::atomic<int>>(0);
    client_options o;
    o.log = [state, gone, late](log_level, std::string_view) {
        if (gone->load()) {
            ++*late;
        }
        ++state->lines; // heap-use-after-free under ASan once `state` is deleted
    };
    make_client("https://" + relay.address(), o);
    auto on = std::make_shared<executor>();
    auto on_mu = std::make_shared<std::mutex>();
    srv().route("GET", "/held", [this, on, on_mu](exchange& ex) {
        auto ctx = ex.start_async(10s);
        {
            std::lock_guard lock(*on_mu);
            *on = ex.executor();
        }
        client_->send(ex.executor(), {.target = "/x"}, [ctx](const result<client_response>& out) mutable {
            response res;
            res.status(502).text(out ? "answered" : error_text(out.error()));
            ctx.complete(std::move(res));
        });
    });
    srv().start();
    test_client c(srv().port(), 10s);
    ASSERT_TRUE(c.send(get_request("/held"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return flight_held->load(); }));
    // The call runs on the server's loop (reactor rows): hold that loop in a task, so that the
    // certificate arrives while ~client runs and is read after it returned, before the pool's
    // shutdown that ~client posts behind it. On the blocking rows the call is on the client's
    // own loop, which ~client joins.
    auto holding = std::make_shared<std::atomic<bool>>(false);
    auto unhold = std::make_shared<std::atomic<bool>>(false);
    if (!connection_per_thread()) {
        std::lock_guard lock(*on_mu);
        ASSERT_TRUE(on->post([holding, unhold] {
            *holding = true;
            (void)wait_until([&] { return unhold->load(); }, 10s);
        }));
        ASSERT_TRUE(wait_until([&] { return holding->load(); }));
    }
    *let_through = true;
    ASSERT_TRUE(wait_until([&] { return written->load(); }));
    std::this_thread::sleep_for(50ms); // on loopback the bytes are in the client's socket now
    client_.reset();
    *gone = true;
    delete state;
    *unhold = true;
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 502) << r->body;
    EXPECT_EQ(late->load(), 0) << "the client's log sink ran after ~client returned";
}

// Over TLS a FIN carries no MAC: anyone on the path can send one. A body that only the end of
// the stream ends is whole only when close_notify authenticates the end (RFC 8446 §6.1, RFC 5246
// §7.2.1); a bare FIN may have cut it (a truncation attack), so the call fails.
TEST_P(client_tls_test, a_close_delimited_body_cut_by_a_bare_fin_is_an_error) {
    fake_upstream up(close_delimited_tls("part of a body", upstream_end::bare_fin));
    make_client("https://" + up.address(), trusting());
    add_routes();
    srv().start();
    for (const char* style : {"/cb", "/co"}) {
        const http_response r = call(style);
        EXPECT_EQ(r.status, 502) << style << ": a body cut by a bare FIN was taken as whole: " << r.body;
        EXPECT_EQ(r.body, error_text(client_errc::reset)) << style;
    }
}

TEST_P(client_tls_test, a_close_delimited_body_ended_by_close_notify_is_whole) {
    fake_upstream up(close_delimited_tls("a whole body", upstream_end::close_notify));
    make_client("https://" + up.address(), trusting());
    add_routes();
    srv().start();
    for (const char* style : {"/cb", "/co"}) {
        const http_response r = call(style);
        EXPECT_EQ(r.status, 200) << style << " " << r.body;
        EXPECT_EQ(r.body, "a whole body") << style;
    }
}

SLUICE_BACKEND_SUITE(client_tls_test);

} // namespace
} // namespace sluice::test
