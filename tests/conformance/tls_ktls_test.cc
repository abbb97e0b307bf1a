// tls.ktls = true on a machine without kTLS (this one: no tls ULP): the probe is logged and
// userspace TLS serves as before.
#include <gtest/gtest.h>

#include "support/backend_matrix.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

class tls_ktls_test : public backend_test {};

TEST_P(tls_ktls_test, without_kernel_support_the_server_logs_the_fallback_and_serves) {
    srv().config().tls.ktls = true;
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    EXPECT_TRUE(srv().log().contains("kTLS unavailable: "));
    EXPECT_TRUE(srv().log().contains(", userspace TLS"));
    const tls_probe_result r = tls_probe(srv().port(), {});
    ASSERT_TRUE(r.answered) << r.error;
    EXPECT_NE(r.response.find("hello"), std::string::npos);
}

SLUICE_TLS_BACKEND_SUITE(tls_ktls_test);

} // namespace
} // namespace sluice::test
