#include "tls/ssl_ctx_builder.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>

#include <sluice/error.h>

#include "regular_file.h"

namespace sluice::detail {

namespace {

// TLS 1.2 suites with forward secrecy (ECDHE) and an AEAD cipher only: no RSA key exchange,
// no CBC, no SHA-1 MACs (Mozilla's "intermediate" profile, 2023). TLS 1.3 suites are all
// AEAD with forward secrecy; OpenSSL's default list stands unless tls.ciphersuites is set.
constexpr const char* default_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                        "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

} // namespace

// Clears the queue so the next check starts clean.
std::string openssl_error() {
    unsigned long last = 0;
    while (const unsigned long e = ERR_get_error()) {
        last = e;
    }
    if (last == 0) {
        return "unknown OpenSSL error";
    }
    char text[256];
    ERR_error_string_n(last, text, sizeof text);
    return text;
}

namespace {

// A readable regular file, or a startup error that says why not (OpenSSL's "system lib" says
// less). Never a wait: a FIFO would block OpenSSL's fopen() for ever (regular_file.h).
void check_readable(const char* key, const std::string& path) {
    const opened_file f = open_regular_file(path);
    if (f.fd < 0) {
        throw startup_error(key, f.why(path));
    }
    ::close(f.fd);
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned int inlen, void*) {
    static constexpr unsigned char http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, outlen, http11, sizeof http11, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
        *out = chosen;
        return SSL_TLSEXT_ERR_OK;
    }
    // A client that offers only h2: answer without ALPN (as nginx does) and let it decide,
    // rather than a fatal alert for a client that may well speak HTTP/1.1 after all.
    return SSL_TLSEXT_ERR_NOACK;
}

void check_validity(const certificate_files& files, X509* cert) {
    if (cert == nullptr) {
        throw startup_error(files.cert_key, "'" + files.cert + "' holds no certificate");
    }
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
        throw startup_error(files.cert_key, "the certificate in '" + files.cert + "' has expired");
    }
    if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
        throw startup_error(files.cert_key, "the certificate in '" + files.cert + "' is not valid yet");
    }
}

} // namespace

// Encrypted keys would need a password source sluice does not have: refuse rather than prompt
// on the terminal (OpenSSL's default) and hang a service that has none.
int no_password(char*, int, int, void*) {
    return -1;
}

void load_certificate(ssl_ctx_st* ctx, const certificate_files& files) {
    check_readable(files.cert_key.c_str(), files.cert);
    if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
        throw startup_error(files.cert_key,
                            "'" + files.cert + "' is not a PEM certificate chain: " + openssl_error());
    }
    check_validity(files, SSL_CTX_get0_certificate(ctx));
    check_readable(files.key_key.c_str(), files.key);
    if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
        // OpenSSL compares the key with the certificate as it loads it.
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            throw startup_error(files.key_key, "the key in '" + files.key +
                                                   "' does not match the certificate in '" + files.cert +
                                                   "'");
        }
        throw startup_error(files.key_key, "'" + files.key +
                                               "' is not an unencrypted PEM private key (encrypted keys are "
                                               "not supported): " +
                                               openssl_error());
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        throw startup_error(files.key_key, "the key in '" + files.key +
                                               "' does not match the certificate in '" + files.cert + "'");
    }
}

namespace {

// Client certificates: the CAs in tls.client_ca both verify the client's chain and are named in
// the CertificateRequest, so a client with several certificates offers the right one. They come
// from the bytes read_client_verification() read (what SSL_CTX_load_verify_locations and
// SSL_load_client_CA_file would read from the file: certificates and CRLs, names once each), so
// that the CAs and the session id context made from those bytes cannot disagree.
void load_client_ca(SSL_CTX* ctx, const tls_config& cfg, const client_verification& v) {
    if (cfg.verify_client == tls_verify_client::off) {
        return;
    }
    const auto no_ca = [&] {
        return startup_error("tls.client_ca",
                             "'" + cfg.client_ca + "' holds no PEM CA certificate: " + openssl_error());
    };
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(
        BIO_new_mem_buf(v.ca_pem.data(), static_cast<int>(v.ca_pem.size())), &BIO_free);
    if (bio == nullptr || v.ca_pem.size() > static_cast<std::size_t>(INT_MAX)) {
        throw no_ca();
    }
    STACK_OF(X509_INFO)* read = PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr);
    const auto free_infos = [](STACK_OF(X509_INFO) * infos) { sk_X509_INFO_pop_free(infos, X509_INFO_free); };
    std::unique_ptr<STACK_OF(X509_INFO), decltype(free_infos)> infos(read, free_infos);
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    if (infos == nullptr || names == nullptr) {
        sk_X509_NAME_free(names);
        throw no_ca();
    }
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    bool ok = true;
    for (int i = 0; ok && i < sk_X509_INFO_num(infos.get()); ++i) {
        const X509_INFO* info = sk_X509_INFO_value(infos.get(), i);
        if (info->crl != nullptr) {
            ok = X509_STORE_add_crl(store, info->crl) == 1;
        }
        if (info->x509 == nullptr || !ok) {
            continue;
        }
        ok = X509_STORE_add_cert(store, info->x509) == 1;
        const X509_NAME* name = X509_get_subject_name(info->x509);
        bool known = false;
        for (int j = 0; !known && j < sk_X509_NAME_num(names); ++j) {
            known = X509_NAME_cmp(sk_X509_NAME_value(names, j), name) == 0;
        }
        if (ok && !known) {
            X509_NAME* copy = X509_NAME_dup(name);
            ok = copy != nullptr && sk_X509_NAME_push(names, copy) > 0;
            if (!ok) {
                X509_NAME_free(copy);
            }
        }
    }
    if (!ok || sk_X509_NAME_num(names) == 0) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        throw no_ca();
    }
    SSL_CTX_set_client_CA_list(ctx, names); // takes ownership
    int mode = SSL_VERIFY_PEER;
    if (cfg.verify_client == tls_verify_client::require) {
        mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    }
    // No callback: OpenSSL's chain verification decides, and a bad chain ends the handshake
    // with an alert in both modes ("optional" only lets a client send none).
    SSL_CTX_set_verify(ctx, mode, nullptr);
}

std::string read_file(const char* key, const std::string& path) {
    // Read from the descriptor that was checked: a second open by name could meet a FIFO put
    // there meanwhile, and wait on it. (O_NONBLOCK does not apply to a regular file's reads.)
    const opened_file f = open_regular_file(path);
    if (f.fd < 0) {
        throw startup_error(key, f.why(path));
    }
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } const guard{f.fd};
    std::string out;
    char buf[16384];
    for (;;) {
        const ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            return out;
        } else if (errno != EINTR) {
            throw startup_error(key, "cannot read '" + path + "': " + std::generic_category().message(errno));
        }
    }
}

} // namespace

client_verification read_client_verification(const tls_config& cfg) {
    client_verification v;
    if (cfg.verify_client != tls_verify_client::off) {
        v.ca_pem = read_file("tls.client_ca", cfg.client_ca);
    }
    // A label (so the value means nothing elsewhere), the mode, then the CAs' bytes.
    static constexpr std::string_view label = "sluice session id context 1";
    const auto mode = static_cast<unsigned char>(cfg.verify_client);
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    unsigned int len = 0;
    if (md == nullptr || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(md.get(), label.data(), label.size() + 1) != 1 ||
        EVP_DigestUpdate(md.get(), &mode, 1) != 1 ||
        EVP_DigestUpdate(md.get(), v.ca_pem.data(), v.ca_pem.size()) != 1 ||
        EVP_DigestFinal_ex(md.get(), v.session_id_context.data(), &len) != 1 ||
        len != v.session_id_context.size()) {
        throw startup_error("tls.client_ca", "cannot hash the client CAs: " + openssl_error());
    }
    return v;
}

ssl_ctx_st* make_server_ssl_ctx(const tls_config& cfg, const certificate_files& files,
                                const client_verification& verification) {
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) {
        throw startup_error(files.cert_key, "cannot create a TLS context: " + openssl_error());
    }
    try {
        const int min_version = cfg.min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION;
        SSL_CTX_set_min_proto_version(ctx, min_version);
        // Renegotiation is refused (CVE-2009-3555, and a CPU cost a client could impose at will);
        // the server picks the suite; no compression (CRIME).
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                     SSL_OP_NO_COMPRESSION);
        // An idle keep-alive connection gives its 2 × ~17 KB record buffers back to the allocator.
        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
        SSL_CTX_set_default_passwd_cb(ctx, no_password);
        SSL_CTX_set_alpn_select_cb(ctx, select_alpn, nullptr);
        // Derived from what verifying a client rests on (client_verification): a session made
        // under other CAs or another verify mode does not resume here, ticket or cached alike.
        static_assert(std::tuple_size_v<decltype(verification.session_id_context)> <= SSL_MAX_SID_CTX_LENGTH);
        if (SSL_CTX_set_session_id_context(
                ctx, verification.session_id_context.data(),
                static_cast<unsigned int>(verification.session_id_context.size())) != 1) {
            throw startup_error(files.cert_key, "cannot set the session id context: " + openssl_error());
        }
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);

        const std::string& ciphers = cfg.ciphers.empty() ? std::string(default_ciphers) : cfg.ciphers;
        if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) {
            throw startup_error("tls.ciphers", "no usable cipher in '" + ciphers + "': " + openssl_error());
        }
        if (!cfg.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, cfg.ciphersuites.c_str()) != 1) {
            throw startup_error("tls.ciphersuites",
                                "no usable suite in '" + cfg.ciphersuites + "': " + openssl_error());
        }

        load_certificate(ctx, files);
        load_client_ca(ctx, cfg, verification);
    } catch (...) {
        SSL_CTX_free(ctx);
        throw;
    }
    return ctx;
}

} // namespace sluice::detail
