// SNI on every TLS row: [[tls.sni]] entries choose the certificate by the name the client sends;
// an unknown name, or none, gets the default certificate (tls.cert).
#include <gtest/gtest.h>

#include "support/backend_matrix.h"
#include "support/test_certs.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

class tls_sni_test : public backend_test {
protected:
    const test_certs fallback_{cert_spec{.common_name = "default.test", .san = "DNS:default.test"}};
    const test_certs alpha_{cert_spec{.common_name = "alpha.test", .san = "DNS:alpha.test"}};
    const test_certs beta_{cert_spec{.common_name = "beta.test", .san = "DNS:beta.test,DNS:*.beta.test"}};

    void start() {
        tls_config& tls = srv().config().tls;
        tls.cert = fallback_.cert_path();
        tls.key = fallback_.key_path();
        tls.sni = {
            {{"alpha.test"}, alpha_.cert_path(), alpha_.key_path()},
            {{"beta.test", "*.beta.test"}, beta_.cert_path(), beta_.key_path()},
        };
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().start();
    }

    std::string cn_for(const std::string& sni) {
        const tls_probe_result r = tls_probe(srv().port(), {.sni = sni});
        EXPECT_TRUE(r.answered) << sni << ": " << r.error;
        return r.subject_cn;
    }
};

TEST_P(tls_sni_test, each_name_gets_its_certificate) {
    start();
    EXPECT_EQ(cn_for("alpha.test"), "alpha.test");
    EXPECT_EQ(cn_for("beta.test"), "beta.test");
    EXPECT_EQ(cn_for("ALPHA.Test"), "alpha.test"); // host names compare without case
}

TEST_P(tls_sni_test, a_wildcard_covers_one_label) {
    start();
    EXPECT_EQ(cn_for("www.beta.test"), "beta.test");
    EXPECT_EQ(cn_for("a.b.beta.test"), "default.test");
    // An empty label is no label, and a host name has no '*' (found by a black-box probe).
    EXPECT_EQ(cn_for(".beta.test"), "default.test");
    EXPECT_EQ(cn_for("*.beta.test"), "default.test");
}

TEST_P(tls_sni_test, an_unknown_name_or_none_gets_the_default_certificate) {
    start();
    EXPECT_EQ(cn_for("gamma.test"), "default.test");
    EXPECT_EQ(cn_for(""), "default.test");
}

TEST_P(tls_sni_test, a_session_resumes_under_its_sni_name) {
    start();
    const tls_probe_result first = tls_probe(srv().port(), {.sni = "alpha.test"});
    ASSERT_TRUE(first.answered) << first.error;
    const tls_probe_result again = tls_probe(srv().port(), {.sni = "alpha.test", .session = first.session});
    ASSERT_TRUE(again.answered) << again.error;
    EXPECT_TRUE(again.reused);
}

SLUICE_TLS_BACKEND_SUITE(tls_sni_test);

} // namespace
} // namespace sluice::test
