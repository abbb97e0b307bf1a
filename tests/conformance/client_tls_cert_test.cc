// sluice::client with a client certificate (client_tls_options::cert_file / key_file), against
// a sluice TLS server that requires one (tls.verify_client = require) on every TLS row: without
// a certificate the call fails with tls_handshake_failed and the log says why; with one it is
// served, and the server's handler sees the certificate's subject (request::tls()).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include <sluice/client.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/log_capture.h"
#include "support/test_certs.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

std::string all_lines(const log_capture& log) {
    std::string out;
    for (const auto& l : log.lines()) {
        out += l.text + "\n";
    }
    return out;
}

class client_tls_cert_test : public backend_test {
protected:
    const test_certs ca_{cert_spec{.common_name = "client CA", .san = ""}};
    const test_certs gateway_{cert_spec{.common_name = "gateway", .san = "", .issuer = &ca_, .ca = false}};

    void SetUp() override {
        backend_test::SetUp();
        srv().config().tls.client_ca = ca_.cert_path();
        srv().config().tls.verify_client = tls_verify_client::require;
        srv().route("GET", "/who", [](exchange& ex) {
            const tls_info* t = ex.request().tls();
            ex.response().text(t != nullptr && t->client_certificate ? t->client_certificate->subject
                                                                     : "nobody");
        });
        srv().start();
    }

    /// A client of this row's server, trusting the run's server certificate.
    std::unique_ptr<client> make_client(const test_certs* cert) {
        client_options o;
        o.tls.ca_file = shared_test_certs().cert_path();
        if (cert != nullptr) {
            o.tls.cert_file = cert->cert_path();
            o.tls.key_file = cert->key_path();
        }
        o.connect_timeout = 10s;
        o.response_timeout = 10s;
        o.log = [this](log_level l, std::string_view text) { log_.record(l, text); };
        return std::make_unique<client>(upstream({"https://127.0.0.1:" + std::to_string(srv().port())}),
                                        std::move(o));
    }

    log_capture log_;
};

TEST_P(client_tls_cert_test, without_a_certificate_the_handshake_fails) {
    auto c = make_client(nullptr);
    const result<client_response> r = c->send_blocking({.target = "/who"});
    ASSERT_FALSE(r) << r->status << " " << r->body;
    // TLS 1.3 (what both sides pick): the refusal arrives after the client's side of the
    // handshake ended, in place of the answer; still a handshake failure.
    EXPECT_EQ(r.error(), make_error_code(client_errc::tls_handshake_failed)) << r.error().message();
    EXPECT_TRUE(log_.contains("certificate required")) << all_lines(log_);
}

TEST_P(client_tls_cert_test, with_a_certificate_the_handler_sees_its_subject) {
    auto c = make_client(&gateway_);
    for (int i = 0; i < 2; ++i) { // the second call rides the pooled connection
        const result<client_response> r = c->send_blocking({.target = "/who"});
        ASSERT_TRUE(r) << r.error().message() << "\n" << all_lines(log_);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "CN=gateway");
    }
    EXPECT_EQ(c->stats().tls_handshakes, 1u);
}

SLUICE_TLS_BACKEND_SUITE(client_tls_cert_test);

} // namespace
} // namespace sluice::test
