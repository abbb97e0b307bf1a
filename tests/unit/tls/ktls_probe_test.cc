// The kTLS probe (tls/ktls_probe.*): on this machine the kernel has no tls ULP (no CONFIG_TLS)
// and the driver's BIO cannot hand records over, so the verdict is "unavailable" with the
// reason; either way it never throws and the server falls back to userspace TLS.
#include <gtest/gtest.h>

#include <string>

#include "tls/ktls_probe.h"

namespace sluice::test {
namespace {

TEST(ktls_probe, reports_unavailable_with_a_reason) {
    const detail::ktls_support s = detail::probe_ktls();
    EXPECT_FALSE(s.usable());
    const std::string text = s.describe();
    EXPECT_TRUE(text.starts_with("kTLS unavailable: ")) << text;
    EXPECT_TRUE(text.ends_with(", userspace TLS")) << text;
    if (!s.kernel) {
        // This kernel: ENOENT, no "tls" module.
        EXPECT_NE(text.find("no tls ULP"), std::string::npos) << text;
        EXPECT_FALSE(s.kernel_error.empty());
    }
}

TEST(ktls_probe, names_each_missing_part) {
    detail::ktls_support s;
    EXPECT_NE(s.describe().find("OpenSSL is built without kTLS"), std::string::npos);
    s.openssl = true;
    s.kernel_error = "No such file or directory";
    EXPECT_NE(s.describe().find("no tls ULP"), std::string::npos);
    s.kernel = true;
    EXPECT_NE(s.describe().find("does not hand records to the kernel"), std::string::npos);
    s.driver = true;
    EXPECT_EQ(s.describe(), "kTLS available");
}

} // namespace
} // namespace sluice::test
