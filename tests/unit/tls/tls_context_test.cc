// tls.cert / tls.key at start: a bad file is a startup error naming the key, the file and why.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <sluice/error.h>

#include "support/test_certs.h"
#include "tls/tls_context.h"

namespace sluice::test {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// The startup error tls_context throws for cfg, or "" when it starts.
startup_error start_error(const tls_config& cfg) {
    try {
        detail::tls_context ctx(cfg);
    } catch (const startup_error& e) {
        return e;
    }
    return startup_error("", "");
}

tls_config config_of(const test_certs& certs) {
    tls_config cfg;
    cfg.cert = certs.cert_path();
    cfg.key = certs.key_path();
    return cfg;
}

TEST(tls_context, starts_with_a_valid_certificate_and_key) {
    const test_certs certs;
    EXPECT_NO_THROW(detail::tls_context ctx(config_of(certs)));
}

TEST(tls_context, missing_certificate_names_the_file_and_the_reason) {
    const test_certs certs;
    tls_config cfg = config_of(certs);
    cfg.cert = certs.dir() + "/nope.pem";
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("nope.pem"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
}

TEST(tls_context, missing_key_names_the_file) {
    const test_certs certs;
    tls_config cfg = config_of(certs);
    cfg.key = certs.dir() + "/nokey.pem";
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("nokey.pem"), std::string::npos) << e.what();
}

TEST(tls_context, a_key_that_is_not_a_key_is_refused) {
    const test_certs certs;
    tls_config cfg = config_of(certs);
    cfg.key =
        certs.write_file("garbage.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("not an unencrypted PEM private key"), std::string::npos)
        << e.what();
}

TEST(tls_context, a_certificate_file_without_a_certificate_is_refused) {
    const test_certs certs;
    tls_config cfg = config_of(certs);
    cfg.cert = certs.write_file("empty.pem", "not a certificate\n");
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("not a PEM certificate chain"), std::string::npos) << e.what();
}

TEST(tls_context, a_key_of_another_certificate_is_refused) {
    const test_certs certs;
    const test_certs other;
    tls_config cfg = config_of(certs);
    cfg.key = other.key_path();
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("does not match the certificate"), std::string::npos) << e.what();
}

TEST(tls_context, an_expired_certificate_is_refused) {
    const test_certs expired(std::chrono::hours(-48), std::chrono::hours(-24));
    const startup_error e = start_error(config_of(expired));
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("has expired"), std::string::npos) << e.what();
}

TEST(tls_context, a_certificate_not_valid_yet_is_refused) {
    const test_certs future(std::chrono::hours(24), std::chrono::hours(48));
    const startup_error e = start_error(config_of(future));
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("not valid yet"), std::string::npos) << e.what();
}

TEST(tls_context, an_unusable_cipher_list_names_its_key) {
    const test_certs certs;
    tls_config cfg = config_of(certs);
    cfg.ciphers = "NO-SUCH-CIPHER";
    EXPECT_EQ(start_error(cfg).key(), "tls.ciphers");
    cfg.ciphers.clear();
    cfg.ciphersuites = "TLS_NO_SUCH_SUITE";
    EXPECT_EQ(start_error(cfg).key(), "tls.ciphersuites");
}

TEST(tls_context, a_chain_in_one_file_is_accepted) {
    const test_certs certs;
    const test_certs issuer;
    tls_config cfg = config_of(certs);
    // Leaf first, then more certificates (here unrelated, as OpenSSL does not check the chain).
    cfg.cert = certs.write_file("chain.pem", read_file(certs.cert_path()) + read_file(issuer.cert_path()));
    EXPECT_NO_THROW(detail::tls_context ctx(cfg));
}

} // namespace
} // namespace sluice::test
