#include "support/test_certs.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
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

void add_ext(X509* cert, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    check(ext != nullptr, "extension");
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
}

void write_pem(const std::string& path, auto write) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    check(f != nullptr, "open for writing");
    const bool ok = write(f);
    std::fclose(f);
    check(ok, "write PEM");
}

} // namespace

test_certs::test_certs(std::chrono::hours not_before, std::chrono::hours not_after) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-certs-XXXXXX").string();
    check(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
    dir_ = tmpl;
    cert_ = dir_ + "/cert.pem";
    key_ = dir_ + "/key.pem";

    pkey_ptr key(EVP_EC_gen("P-256"));
    check(key != nullptr, "EC key");
    x509_ptr cert(X509_new());
    X509_set_version(cert.get(), 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), std::rand() & 0x7fffffff);
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), std::chrono::seconds(not_before).count());
    X509_gmtime_adj(X509_getm_notAfter(cert.get()), std::chrono::seconds(not_after).count());
    X509_set_pubkey(cert.get(), key.get());
    X509_NAME* name = X509_get_subject_name(cert.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"),
                               -1, -1, 0);
    X509_set_issuer_name(cert.get(), name);
    add_ext(cert.get(), NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    add_ext(cert.get(), NID_basic_constraints, "critical,CA:TRUE");
    check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "sign");
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
