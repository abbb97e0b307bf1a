// The client's TLS settings for its https:// upstreams as one OpenSSL context (SSL_CTX), built
// once per sluice::client from client_options::tls and shared by the loops its calls run on.
// It makes each connection's SSL (connect state, SNI, the name to check, the last session of
// that address) and hears how its handshake ended; tls_driver does the rest (docs/tls.md,
// "Client").
//
// Sessions: one slot per upstream address, filled by OpenSSL's new-session callback (TLS 1.3
// tickets arrive after the handshake, with the first records read), read when the next
// connection to that address is made. Slots are per client, never shared between clients:
// a session made without verification must not resume under a client that verifies.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sluice/client.h>
#include <sluice/log.h>

struct ssl_st;
struct ssl_ctx_st;
struct ssl_session_st;

namespace sluice::detail {

class upstream_state;

class client_tls_context {
public:
    /// Loads the CAs (ca_file, or the system's default paths) and the client certificate
    /// (cert_file, key_file). Throws std::invalid_argument naming client.tls.ca_file,
    /// client.tls.cert_file or client.tls.key_file and why when one cannot be loaded. Logs a
    /// warning naming the https addresses when verification is off.
    client_tls_context(const client_tls_options& o, const upstream_state& up, logger log);
    ~client_tls_context();
    client_tls_context(const client_tls_context&) = delete;
    client_tls_context& operator=(const client_tls_context&) = delete;

    /// A new SSL in connect state for the upstream's host `address` (upstream_address::host): SNI (not for an
    /// IP literal, RFC 6066 §3), the name or IP the certificate must carry, the address's last session. Null
    /// when out of memory.
    ssl_st* new_ssl(std::size_t address) noexcept;
    /// The handshake of `ssl` (made by new_ssl) succeeded: counts it.
    void handshake_done(ssl_st* ssl) noexcept;
    /// The handshake failed: logs why, with OpenSSL's error queue still holding the reason.
    /// -EKEYREJECTED when the certificate failed verification, else -EPROTO.
    int handshake_failed(ssl_st* ssl) noexcept;
    /// The upstream ended the connection with a TLS error before any byte of an answer, after
    /// the handshake (TLS 1.3: a refused client certificate). Logs why, as handshake_failed.
    void refused_after_handshake(ssl_st* ssl) noexcept;

    std::uint64_t handshakes() const noexcept { return handshakes_.load(std::memory_order_relaxed); }
    std::uint64_t resumed() const noexcept { return resumed_.load(std::memory_order_relaxed); }

    /// One host's last session (its resolved addresses share it: one name, one certificate) and what the log
    /// calls it. Written by any loop's thread.
    struct slot {
        std::mutex mu;
        ssl_session_st* session = nullptr;
        std::string name;    ///< the address as given
        std::string checked; ///< the name (or IP) sent as SNI and checked against the certificate
        bool ip = false;     ///< checked is an IP literal
    };

private:
    static int on_new_session(ssl_st* ssl, ssl_session_st* session);

    ssl_ctx_st* ctx_ = nullptr;
    const client_tls_options options_;
    std::vector<std::unique_ptr<slot>> slots_;
    logger log_;
    std::atomic<std::uint64_t> handshakes_{0};
    std::atomic<std::uint64_t> resumed_{0};
};

} // namespace sluice::detail
