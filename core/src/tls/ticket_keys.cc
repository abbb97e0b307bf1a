#include "tls/ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#include <cstring>
#include <stdexcept>

namespace sluice::detail {

ticket_keys::ticket_keys(std::chrono::seconds period) : period_(period), made_at_(clock::now()) {
    if (!make(current_)) {
        throw std::runtime_error("no random bytes for the session ticket key");
    }
}

bool ticket_keys::make(key& k) noexcept {
    return RAND_bytes(k.name, sizeof k.name) == 1 && RAND_priv_bytes(k.aes, sizeof k.aes) == 1 &&
           RAND_priv_bytes(k.hmac, sizeof k.hmac) == 1;
}

void ticket_keys::rotate() noexcept {
    std::lock_guard lock(mu_);
    rotate_locked();
}

void ticket_keys::rotate_locked() noexcept {
    key next{};
    if (!make(next)) {
        return; // keep serving with the old key rather than fail handshakes
    }
    previous_ = current_;
    has_previous_ = true;
    current_ = next;
    made_at_ = clock::now();
}

// Rotation happens when a ticket is made or opened, not on a timer: no thread of its own, and
// an idle server's key ages the same way. After two periods without a ticket, both keys go.
void ticket_keys::expire_locked(clock::time_point now) noexcept {
    if (now - made_at_ < period_) {
        return;
    }
    const bool both_stale = now - made_at_ >= 2 * period_;
    rotate_locked();
    if (both_stale) {
        rotate_locked();
    }
}

int ticket_keys::on_ticket(unsigned char name[16], unsigned char* iv, evp_cipher_ctx_st* cipher,
                           evp_mac_ctx_st* mac, int enc) noexcept {
    key k{};
    int found = 1;
    {
        std::lock_guard lock(mu_);
        expire_locked(clock::now());
        if (enc == 1) {
            k = current_;
        } else if (std::memcmp(name, current_.name, sizeof current_.name) == 0) {
            k = current_;
        } else if (has_previous_ && std::memcmp(name, previous_.name, sizeof previous_.name) == 0) {
            k = previous_;
            found = 2; // valid, but ask OpenSSL for a fresh ticket under the current key
        } else {
            return 0; // an unknown or retired key: a full handshake, not an error
        }
    }
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k.hmac, sizeof k.hmac),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    if (enc == 1) {
        std::memcpy(name, k.name, sizeof k.name);
        if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) != 1 ||
            EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes, iv) != 1) {
            OPENSSL_cleanse(&k, sizeof k);
            return -1;
        }
    } else if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, k.aes, iv) != 1) {
        OPENSSL_cleanse(&k, sizeof k);
        return -1;
    }
    const int ok = EVP_MAC_CTX_set_params(mac, params);
    OPENSSL_cleanse(&k, sizeof k);
    return ok == 1 ? found : -1;
}

} // namespace sluice::detail
