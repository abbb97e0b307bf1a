#include "support/test_certs.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace sluice::test {

namespace {

template <auto Free>
struct freer {
    template <class T>
    void operator()(T* p) const noexcept {
        Free(p);
    }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, freer<EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, freer<X509_free>>;

void check(bool ok, const char* what) {
    if (!ok) {
        throw std::runtime_error(std::string("test_certs: ") + what);
    }
}

void add_ext(X509V3_CTX& ctx, X509* cert, int nid, const char* value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    check(ext != nullptr, "extension");
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
}

x509_ptr read_cert(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    check(f != nullptr, "open the issuer's certificate");
    x509_ptr cert(PEM_read_X509(f, nullptr, nullptr, nullptr));
    std::fclose(f);
    check(cert != nullptr, "read the issuer's certificate");
    return cert;
}

pkey_ptr read_key(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    check(f != nullptr, "open the issuer's key");
    pkey_ptr key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr));
    std::fclose(f);
    check(key != nullptr, "read the issuer's key");
    return key;
}

void write_pem(const std::string& path, auto write) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    check(f != nullptr, "open for writing");
    const bool ok = write(f);
    std::fclose(f);
    check(ok, "write PEM");
}

} // namespace

test_certs::test_certs(std::chrono::hours not_before, std::chrono::hours not_after)
    : test_certs(cert_spec{.not_before = not_before, .not_after = not_after}) {}

test_certs::test_certs(const cert_spec& spec) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-certs-XXXXXX").string();
    check(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    dir_ = tmpl;
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";

    pkey_ptr key(EVP_EC_gen("P-256"));
    check(key != nullptr, "EC key");
    x509_ptr cert(X509_new());
    X509_set_version(cert.get(), 2);
    // Random serials: a test that reloads a certificate tells the old from the new by it.
    unsigned char serial_bytes[8];
    check(RAND_bytes(serial_bytes, sizeof serial_bytes) == 1, "serial");
    serial_bytes[0] &= 0x7f; // positive
    BIGNUM* bn = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
    char* hex = BN_bn2hex(bn);
    serial_ = hex;
    OPENSSL_free(hex);
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), std::chrono::seconds(spec.not_before).count());
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), std::chrono::seconds(spec.not_after).count());
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0);
    x509_ptr issuer_cert;
    pkey_ptr issuer_key;
    if (spec.issuer != nullptr) {
        issuer_cert = read_cert(spec.issuer->cert_path());
        issuer_key = read_key(spec.issuer->key_path());
        X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer_cert.get()));
    } else {
        X509_set_issuer_name(cert.get(), name);
    }
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : cert.get(), cert.get(), nullptr, nullptr, 0);
    if (!spec.san.empty()) {
        add_ext(ctx, cert.get(), NID_subject_alt_name, spec.san.c_str());
    }
    add_ext(ctx, cert.get(), NID_basic_constraints, spec.ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    check(X509_sign(cert.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()) > 0, "sign");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    check(X509_digest(cert.get(), EVP_sha256(), md, &md_len) == 1, "digest");
    for (unsigned int i = 0; i < md_len; ++i) {
        char two[3];
        std::snprintf(two, sizeof two, "%02x", md[i]);
        sha256_ += two;
    }
    write_pem(cert_, [&](std::FILE* f) { return PEM_write_X509(f, cert.get()) == 1; });
    write_pem(key_, [&](std::FILE* f) {
        return PEM_write_PrivateKey(f, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
    });
}

test_certs::~test_certs() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

std::string test_certs::write_file(const std::string& name, const std::string& text) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
}

const test_certs& shared_test_certs() {
    static const test_certs certs; // one key per test program: key generation is not free
    return certs;
}

} // namespace sluice::test
