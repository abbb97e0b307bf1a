#include "tls/describe_tls.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <new>

namespace sluice::detail {

namespace {

std::string name_rfc2253(const X509_NAME* name) {
    BIO* out = BIO_new(BIO_s_mem());
    if (out == nullptr) {
        throw std::bad_alloc();
    }
    std::unique_ptr<BIO, decltype(&BIO_free)> guard(out, &BIO_free);
    // XN_FLAG_RFC2253: RDNs most specific first, special characters escaped (RFC 2253 §2.4),
    // bytes outside ASCII as \XX: the same string as nginx's $ssl_client_s_dn, so access rules
    // written for one match the other.
    if (X509_NAME_print_ex(out, name, 0, XN_FLAG_RFC2253) < 0) {
        throw std::bad_alloc();
    }
    char* data = nullptr;
    const long len = BIO_get_mem_data(out, &data);
    return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

std::string serial_hex(const X509* cert) {
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    if (bn == nullptr) {
        throw std::bad_alloc();
    }
    char* hex = BN_bn2hex(bn);
    BN_free(bn);
    if (hex == nullptr) {
        throw std::bad_alloc();
    }
    std::string out(hex);
    OPENSSL_free(hex);
    return out;
}

std::string sha256_hex(const X509* cert) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (X509_digest(cert, EVP_sha256(), md, &len) != 1) {
        throw std::bad_alloc();
    }
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(std::size_t{len} * 2);
    for (unsigned int i = 0; i < len; ++i) {
        out.push_back(digits[md[i] >> 4]);
        out.push_back(digits[md[i] & 0xF]);
    }
    return out;
}

} // namespace

std::shared_ptr<const tls_info> describe_tls(ssl_st* ssl) {
    auto info = std::make_shared<tls_info>();
    info->version = SSL_get_version(ssl);
    if (const char* cipher = SSL_get_cipher_name(ssl)) {
        info->cipher = cipher;
    }
    if (const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name)) {
        info->server_name = sni;
    }
    info->resumed = SSL_session_reused(ssl) == 1;
    // A resumed session carries the certificate and the verification result of the handshake
    // that made it (RFC 8446 §2.2), so both cases read the same way.
    if (const X509* cert = SSL_get0_peer_certificate(ssl)) {
        tls_client_certificate c;
        c.subject = name_rfc2253(X509_get_subject_name(cert));
        c.issuer = name_rfc2253(X509_get_issuer_name(cert));
        c.serial = serial_hex(cert);
        c.sha256 = sha256_hex(cert);
        c.verified = SSL_get_verify_result(ssl) == X509_V_OK;
        info->client_certificate = std::move(c);
    }
    ERR_clear_error();
    return info;
}

} // namespace sluice::detail
