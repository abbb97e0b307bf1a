// The server's TLS contexts: the default certificate's SSL_CTX and one per [[tls.sni]] entry,
// built at start from the tls.* keys and rebuilt by reload() (SIGHUP). Every loop makes its
// connections' SSL objects here, at accept, while a reload may be swapping the contexts:
//
//   loop threads: new_ssl() ── copy the current set (mutex, one shared_ptr copy) ── SSL_new
//   reload():     build a new set (no lock held) ── swap it in (mutex) ── the old set is freed
//                 when the last SSL made from it is (SSL_new takes a reference on its SSL_CTX)
//
// A connection keeps the certificate it started with; the next handshake gets the new one.
// The SNI table and the ticket keys hang off each SSL_CTX (ex_data), so a connection made
// from an old set finds that set's table however long it lives. The ticket keys are one
// object for every set: a reload keeps tickets valid.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include <sluice/config.h>

struct ssl_ctx_st;
struct ssl_st;

namespace sluice::detail {

class ticket_keys;

class tls_context {
public:
    /// Session ticket keys rotate this often (the previous key still opens tickets).
    static constexpr std::chrono::seconds default_ticket_rotation{3600};

    /// Loads every certificate and key and applies the protocol settings. Throws startup_error
    /// naming the key (tls.cert, tls.key, tls.sni[1].cert, tls.client_ca, tls.ciphers, ...)
    /// and why: a missing file, a key that does not parse or is encrypted, a key that does not
    /// match the certificate, a certificate that has expired or is not valid yet.
    explicit tls_context(const tls_config& cfg,
                         std::chrono::seconds ticket_rotation = default_ticket_rotation);
    ~tls_context();
    tls_context(const tls_context&) = delete;
    tls_context& operator=(const tls_context&) = delete;

    /// A server-side SSL from the current contexts, or null (out of memory). Thread-safe.
    ssl_st* new_ssl() const noexcept;

    /// Reads the same files again and swaps the new contexts in. On any error (the same
    /// startup_error the constructor throws) the current contexts stay. Thread-safe; reloads
    /// are serialised.
    void reload();

    std::uint32_t handshake_timeout_ms() const noexcept { return cfg_.handshake_timeout_ms; }
    /// The session ticket keys (tests rotate them by hand).
    ticket_keys& tickets() noexcept { return *tickets_; }

private:
    std::shared_ptr<ssl_ctx_st> build() const;

    const tls_config cfg_;
    const std::shared_ptr<ticket_keys> tickets_;
    std::mutex reload_mu_;
    mutable std::mutex mu_;               // guards current_ (held for a shared_ptr copy)
    std::shared_ptr<ssl_ctx_st> current_; // the default certificate's; the SNI ones hang off it
};

} // namespace sluice::detail
