// Session resumption on every TLS row: a second connection that offers the first one's session
// (a session id in TLS 1.2, a ticket in TLS 1.3) resumes it, so it skips the certificate
// and the key exchange's signature; a session the server never issued does not.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "support/backend_matrix.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

class tls_session_test : public backend_test {
protected:
    void start_hello() {
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().start();
    }

    void expect_resumes(int version) {
        const tls_probe_result first = tls_probe(srv().port(), {.version = version});
        ASSERT_TRUE(first.answered) << first.error;
        EXPECT_FALSE(first.reused);
        ASSERT_TRUE(first.session);
        for (int i = 0; i < 3; ++i) {
            const tls_probe_result again =
                tls_probe(srv().port(), {.session = first.session, .version = version});
            ASSERT_TRUE(again.answered) << again.error;
            EXPECT_TRUE(again.reused) << "connection " << i + 2 << " did a full handshake";
            EXPECT_NE(again.response.find("hello"), std::string::npos);
        }
    }
};

TEST_P(tls_session_test, tls12_session_resumes) {
    start_hello();
    expect_resumes(TLS1_2_VERSION);
}

TEST_P(tls_session_test, tls13_ticket_resumes) {
    start_hello();
    expect_resumes(TLS1_3_VERSION);
}

TEST_P(tls_session_test, a_session_from_another_server_is_not_resumed) {
    start_hello();
    test_server other(GetParam().backend, GetParam().dispatch);
    other.config().tls = srv().config().tls;
    other.route("GET", "/", [](exchange& ex) { ex.response().text("other"); });
    other.start();
    const tls_probe_result foreign = tls_probe(other.port(), {});
    ASSERT_TRUE(foreign.session) << foreign.error;
    // Same certificate, but its own ticket keys and cache: a full handshake, and it still serves.
    const tls_probe_result here = tls_probe(srv().port(), {.session = foreign.session});
    ASSERT_TRUE(here.answered) << here.error;
    EXPECT_FALSE(here.reused);
    other.stop();
}

SLUICE_TLS_BACKEND_SUITE(tls_session_test);

} // namespace
} // namespace sluice::test
