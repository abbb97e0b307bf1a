// One server SSL_CTX from one certificate and key plus the tls.* protocol settings: what the
// default certificate and every [[tls.sni]] entry are each made of (tls_context.cc).
#pragma once

#include <array>
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

/// What verifying a client certificate rests on, read once for a whole set of contexts (the
/// default one and every [[tls.sni]] one of a start or a reload), so that all of them verify
/// against the same CAs and carry the same session id context.
struct client_verification {
    std::string ca_pem; ///< tls.client_ca's bytes; empty with tls.verify_client = off
    /// SHA-256 over the verify mode and ca_pem. A session (a cached one or a ticket: the ticket
    /// keys outlive a reload) resumes only under the context it was made in (OpenSSL compares
    /// the two for both), and it carries the client certificate verified when it was made:
    /// after a reload that changes the CAs, a certificate of a removed CA must not get in by
    /// resuming. The server's own certificate is left out (it is not what the session
    /// vouches for), so renewing it keeps sessions resumable.
    std::array<unsigned char, 32> session_id_context{};
};

/// Reads tls.client_ca when tls.verify_client is not off. Throws startup_error naming
/// tls.client_ca when it cannot be read.
client_verification read_client_verification(const tls_config& cfg);

/// A new SSL_CTX (the caller owns its reference). Throws startup_error naming the key and why:
/// a missing file, a key that does not parse or is encrypted, a key that does not match the
/// certificate, a certificate that has expired or is not valid yet, an unusable cipher list,
/// a tls.client_ca without a CA certificate.
ssl_ctx_st* make_server_ssl_ctx(const tls_config& cfg, const certificate_files& files,
                                const client_verification& verification);

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
