// One server SSL_CTX from one certificate and key plus the tls.* protocol settings: what the
// default certificate and every [[tls.sni]] entry are each made of (tls_context.cc).
#pragma once

#include <string>

#include <sluice/config.h>

struct ssl_ctx_st;

namespace sluice::detail {

/// Which files, and the names of the keys that set them (errors say "tls.sni[1].cert").
struct certificate_files {
    std::string cert;
    std::string key;
    std::string cert_key = "tls.cert";
    std::string key_key = "tls.key";
};

/// A new SSL_CTX (the caller owns its reference). Throws startup_error naming the key and why:
/// a missing file, a key that does not parse or is encrypted, a key that does not match the
/// certificate, a certificate that has expired or is not valid yet, an unusable cipher list,
/// an unreadable tls.client_ca.
ssl_ctx_st* make_server_ssl_ctx(const tls_config& cfg, const certificate_files& files);

/// Loads files.cert (a PEM chain, leaf first) and files.key into ctx, as a server's or a
/// client's own certificate. Throws startup_error naming the key and why: unreadable, not PEM,
/// an encrypted key, a key that does not match, a certificate expired or not valid yet. Set
/// no_password as ctx's password callback first.
void load_certificate(ssl_ctx_st* ctx, const certificate_files& files);

/// A password callback that refuses: an encrypted key fails to load instead of prompting.
int no_password(char* buf, int size, int rwflag, void* user);

/// The newest error OpenSSL queued, as text; clears the queue.
std::string openssl_error();

} // namespace sluice::detail
