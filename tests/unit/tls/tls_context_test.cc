// tls.cert / tls.key at start: a bad file is a startup error naming the key, the file and why.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

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

TEST(tls_context, starts_with_a_valid_certificate_and_key) {
    const test_certs certs;
    EXPECT_NO_THROW(detail::tls_context ctx(certs.server_tls()));
}

TEST(tls_context, missing_certificate_names_the_file_and_the_reason) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.cert = certs.dir() + "/nope.pem";
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("nope.pem"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
}

TEST(tls_context, missing_key_names_the_file) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.key = certs.dir() + "/nokey.pem";
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("nokey.pem"), std::string::npos) << e.what();
}

TEST(tls_context, a_key_that_is_not_a_key_is_refused) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.key =
        certs.write_file("garbage.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("not an unencrypted PEM private key"), std::string::npos)
        << e.what();
}

TEST(tls_context, a_certificate_file_without_a_certificate_is_refused) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.cert = certs.write_file("empty.pem", "not a certificate\n");
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("not a PEM certificate chain"), std::string::npos) << e.what();
}

TEST(tls_context, a_key_of_another_certificate_is_refused) {
    const test_certs certs;
    const test_certs other;
    tls_config cfg = certs.server_tls();
    cfg.key = other.key_path();
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_NE(std::string(e.what()).find("does not match the certificate"), std::string::npos) << e.what();
}

TEST(tls_context, an_expired_certificate_is_refused) {
    const test_certs expired(std::chrono::hours(-48), std::chrono::hours(-24));
    const startup_error e = start_error(expired.server_tls());
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("has expired"), std::string::npos) << e.what();
}

TEST(tls_context, a_certificate_not_valid_yet_is_refused) {
    const test_certs future(std::chrono::hours(24), std::chrono::hours(48));
    const startup_error e = start_error(future.server_tls());
    EXPECT_EQ(e.key(), "tls.cert");
    EXPECT_NE(std::string(e.what()).find("not valid yet"), std::string::npos) << e.what();
}

TEST(tls_context, an_unusable_cipher_list_names_its_key) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.ciphers = "NO-SUCH-CIPHER";
    EXPECT_EQ(start_error(cfg).key(), "tls.ciphers");
    cfg.ciphers.clear();
    cfg.ciphersuites = "TLS_NO_SUCH_SUITE";
    EXPECT_EQ(start_error(cfg).key(), "tls.ciphersuites");
}

TEST(tls_context, a_chain_in_one_file_is_accepted) {
    const test_certs certs;
    const test_certs issuer;
    tls_config cfg = certs.server_tls();
    // Leaf first, then more certificates (here unrelated, as OpenSSL does not check the chain).
    cfg.cert = certs.write_file("chain.pem", read_file(certs.cert_path()) + read_file(issuer.cert_path()));
    EXPECT_NO_THROW(detail::tls_context ctx(cfg));
}

TEST(tls_context, an_sni_entry_error_names_the_entry) {
    const test_certs certs;
    const test_certs other;
    tls_config cfg = certs.server_tls();
    cfg.sni = {{{"a.test"}, other.cert_path(), other.key_path()},
               {{"b.test"}, certs.dir() + "/missing.pem", other.key_path()}};
    startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.sni[1].cert");
    EXPECT_NE(std::string(e.what()).find("missing.pem"), std::string::npos) << e.what();
    cfg.sni[1] = {{"b.test"}, other.cert_path(), certs.key_path()};
    e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.sni[1].key");
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos) << e.what();
}

TEST(tls_context, an_unreadable_client_ca_names_its_key) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.verify_client = tls_verify_client::require;
    cfg.client_ca = certs.dir() + "/no-ca.pem";
    EXPECT_EQ(start_error(cfg).key(), "tls.client_ca");
    cfg.client_ca = certs.write_file("not-ca.pem", "nothing\n");
    const startup_error e = start_error(cfg);
    EXPECT_EQ(e.key(), "tls.client_ca");
    EXPECT_NE(std::string(e.what()).find("holds no PEM CA certificate"), std::string::npos) << e.what();
}

TEST(tls_context, a_failed_reload_keeps_the_contexts_and_throws_the_startup_error) {
    const test_certs certs;
    tls_config cfg = certs.server_tls();
    cfg.cert = certs.write_file("live.pem", read_file(certs.cert_path()));
    detail::tls_context ctx(cfg);
    certs.write_file("live.pem", "gone\n");
    try {
        ctx.reload();
        ADD_FAILURE() << "reload of a bad file did not throw";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "tls.cert");
    }
    SSL* ssl = ctx.new_ssl();
    ASSERT_NE(ssl, nullptr);
    EXPECT_NE(SSL_get_certificate(ssl), nullptr);
    SSL_free(ssl);
}

} // namespace
} // namespace sluice::test
