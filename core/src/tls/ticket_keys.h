// The keys that encrypt session tickets (RFC 5077; RFC 8446 section 4.6.1), rotated on a period
// so that a stolen key opens at most two periods of recorded sessions' tickets, and shared by
// every context a reload makes, so that a reload does not turn every ticket away.
//
//   made ──(period passes, at the next ticket)──> current ──> previous ──> gone
//
// A ticket is made with the current key; one made with the previous key is still accepted and
// renewed (the client gets a ticket under the current key). OpenSSL calls the callback from
// every loop thread: the keys sit behind a mutex, held for a copy of 80 bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

struct ssl_st;
struct evp_cipher_ctx_st;
struct evp_mac_ctx_st;

namespace sluice::detail {

class ticket_keys {
public:
    using clock = std::chrono::steady_clock;

    /// Makes the first key; throws std::runtime_error when the random generator fails.
    explicit ticket_keys(std::chrono::seconds period);

    /// The current key becomes the previous one and a new key is made (a failing random
    /// generator keeps the keys as they are). The period calls it; tests call it directly.
    void rotate() noexcept;

    /// OpenSSL's ticket callback (SSL_CTX_set_tlsext_ticket_key_evp_cb), for `enc` = 1 (make a
    /// ticket: fills name and iv) or 0 (open one named `name`). Returns 1 (done), 2 (opened with
    /// the previous key: renew it), 0 (unknown key: full handshake) or -1 (error).
    int on_ticket(unsigned char name[16], unsigned char* iv, evp_cipher_ctx_st* cipher, evp_mac_ctx_st* mac,
                  int enc) noexcept;

    std::chrono::seconds period() const noexcept { return period_; }

private:
    struct key {
        unsigned char name[16];
        unsigned char aes[32];
        unsigned char hmac[32];
    };
    static bool make(key& k) noexcept;
    void rotate_locked() noexcept;
    void expire_locked(clock::time_point now) noexcept;

    const std::chrono::seconds period_;
    std::mutex mu_;
    key current_{};
    key previous_{};
    bool has_previous_ = false;
    clock::time_point made_at_;
};

} // namespace sluice::detail
