// client_tls_options::cert_file / key_file are checked when the client is built: a bad file
// throws std::invalid_argument naming the option, the file and why, never at the first call.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include <sluice/client.h>

#include "support/test_certs.h"

namespace sluice::test {
namespace {

// Never connected to: the constructor is what is tested.
const char* const unused_https = "https://127.0.0.1:9";

std::string construction_error(const std::string& cert, const std::string& key) {
    client_options o;
    o.tls.cert_file = cert;
    o.tls.key_file = key;
    try {
        client c(upstream({unused_https}), o);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

class client_certificate_test : public ::testing::Test {
protected:
    const test_certs alice_{cert_spec{.common_name = "alice", .san = ""}};
    const test_certs bob_{cert_spec{.common_name = "bob", .san = ""}};
};

TEST_F(client_certificate_test, a_matching_pair_loads) {
    EXPECT_EQ(construction_error(alice_.cert_path(), alice_.key_path()), "");
}

TEST_F(client_certificate_test, a_missing_file_is_named) {
    const std::string missing = alice_.dir() + "/nowhere.pem";
    const std::string e = construction_error(missing, alice_.key_path());
    EXPECT_NE(e.find("client.tls.cert_file"), std::string::npos) << e;
    EXPECT_NE(e.find(missing), std::string::npos) << e;
    EXPECT_NE(e.find("No such file"), std::string::npos) << e;
    const std::string k = construction_error(alice_.cert_path(), missing);
    EXPECT_NE(k.find("client.tls.key_file"), std::string::npos) << k;
}

TEST_F(client_certificate_test, a_file_that_is_not_pem_is_refused) {
    const std::string junk = alice_.write_file("junk.pem", "not a certificate\n");
    const std::string e = construction_error(junk, alice_.key_path());
    EXPECT_NE(e.find("client.tls.cert_file"), std::string::npos) << e;
    EXPECT_NE(e.find("not a PEM certificate"), std::string::npos) << e;
    const std::string k = construction_error(alice_.cert_path(), junk);
    EXPECT_NE(k.find("client.tls.key_file"), std::string::npos) << k;
    EXPECT_NE(k.find("not an unencrypted PEM private key"), std::string::npos) << k;
}

TEST_F(client_certificate_test, a_key_of_another_certificate_is_refused) {
    const std::string e = construction_error(alice_.cert_path(), bob_.key_path());
    EXPECT_NE(e.find("client.tls.key_file"), std::string::npos) << e;
    EXPECT_NE(e.find("does not match"), std::string::npos) << e;
    EXPECT_NE(e.find(bob_.key_path()), std::string::npos) << e;
}

TEST_F(client_certificate_test, one_without_the_other_is_refused) {
    EXPECT_NE(construction_error(alice_.cert_path(), "").find("client.tls.key_file"), std::string::npos);
    EXPECT_NE(construction_error("", alice_.key_path()).find("client.tls.cert_file"), std::string::npos);
}

TEST_F(client_certificate_test, an_encrypted_key_is_refused_without_a_prompt) {
    // There is no password source: OpenSSL's default would ask on the terminal and hang.
    std::FILE* in = std::fopen(alice_.key_path().c_str(), "r");
    ASSERT_NE(in, nullptr);
    EVP_PKEY* key = PEM_read_PrivateKey(in, nullptr, nullptr, nullptr);
    std::fclose(in);
    ASSERT_NE(key, nullptr);
    const std::string path = alice_.dir() + "/encrypted.key";
    std::FILE* out = std::fopen(path.c_str(), "w");
    ASSERT_NE(out, nullptr);
    static char secret[] = "secret";
    const int written = PEM_write_PrivateKey(out, key, EVP_aes_256_cbc(), nullptr, 0, nullptr, secret);
    std::fclose(out);
    EVP_PKEY_free(key);
    ASSERT_EQ(written, 1);
    const std::string e = construction_error(alice_.cert_path(), path);
    EXPECT_NE(e.find("client.tls.key_file"), std::string::npos) << e;
    EXPECT_NE(e.find("encrypted"), std::string::npos) << e;
}

} // namespace
} // namespace sluice::test
