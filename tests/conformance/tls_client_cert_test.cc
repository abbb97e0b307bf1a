// Client certificates on every TLS row (tls.client_ca + tls.verify_client): a certificate from
// the configured CA is accepted; one from another CA is refused; none is refused under
// "require" and served under "optional".
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "support/backend_matrix.h"
#include "support/test_certs.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

class tls_client_cert_test : public backend_test {
protected:
    const test_certs ca_{cert_spec{.common_name = "client CA", .san = ""}};
    const test_certs good_{cert_spec{.common_name = "alice", .san = "", .issuer = &ca_, .ca = false}};
    const test_certs other_ca_{cert_spec{.common_name = "another CA", .san = ""}};
    const test_certs stranger_{
        cert_spec{.common_name = "mallory", .san = "", .issuer = &other_ca_, .ca = false}};

    void start(tls_verify_client mode) {
        srv().config().tls.client_ca = ca_.cert_path();
        srv().config().tls.verify_client = mode;
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().start();
    }

    tls_probe_result probe_with(const test_certs* cert, int version) {
        tls_probe_options o{.version = version};
        if (cert != nullptr) {
            o.client_cert = cert->cert_path();
            o.client_key = cert->key_path();
        }
        return tls_probe(srv().port(), o);
    }
};

TEST_P(tls_client_cert_test, require_accepts_a_certificate_from_the_ca) {
    start(tls_verify_client::require);
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        const tls_probe_result r = probe_with(&good_, v);
        EXPECT_TRUE(r.answered) << v << ": " << r.error;
        EXPECT_NE(r.response.find("hello"), std::string::npos);
    }
}

TEST_P(tls_client_cert_test, require_refuses_a_client_without_a_certificate) {
    start(tls_verify_client::require);
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        // TLS 1.3 clients finish their side first; the server's alert arrives in place of the answer.
        const tls_probe_result r = probe_with(nullptr, v);
        EXPECT_FALSE(r.answered) << v << ": " << r.response;
    }
}

TEST_P(tls_client_cert_test, a_certificate_from_another_ca_is_refused) {
    start(tls_verify_client::require);
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        const tls_probe_result r = probe_with(&stranger_, v);
        EXPECT_FALSE(r.answered) << v << ": " << r.response;
    }
}

TEST_P(tls_client_cert_test, optional_serves_a_client_without_one_and_refuses_a_bad_one) {
    start(tls_verify_client::optional);
    const tls_probe_result none = probe_with(nullptr, 0);
    EXPECT_TRUE(none.answered) << none.error;
    const tls_probe_result good = probe_with(&good_, 0);
    EXPECT_TRUE(good.answered) << good.error;
    const tls_probe_result bad = probe_with(&stranger_, 0);
    EXPECT_FALSE(bad.answered) << bad.response;
}

SLUICE_TLS_BACKEND_SUITE(tls_client_cert_test);

} // namespace
} // namespace sluice::test
