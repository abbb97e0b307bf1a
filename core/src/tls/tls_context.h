// The server's TLS settings as one OpenSSL context (SSL_CTX), built once at start from
// the tls.* keys and shared by every loop (SSL_CTX is safe to share once configured; each
// connection gets its own SSL from it).
#pragma once

#include <memory>

#include <sluice/config.h>

struct ssl_ctx_st;

namespace sluice::detail {

class tls_context {
public:
    /// Loads the certificate chain and key and applies the protocol settings. Throws
    /// startup_error naming the key (tls.cert, tls.key, tls.ciphers, ...) and why: a missing
    /// file, a key that does not parse or is encrypted, a key that does not match the
    /// certificate, a certificate that has expired or is not valid yet.
    explicit tls_context(const tls_config& cfg);
    ~tls_context();
    tls_context(const tls_context&) = delete;
    tls_context& operator=(const tls_context&) = delete;

    ssl_ctx_st* native() const noexcept { return ctx_; }
    std::uint32_t handshake_timeout_ms() const noexcept { return handshake_timeout_ms_; }

private:
    ssl_ctx_st* ctx_ = nullptr;
    std::uint32_t handshake_timeout_ms_;
};

} // namespace sluice::detail
