#include "tls/tls_context.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include <sluice/error.h>

#include "tls/ssl_ctx_builder.h"
#include "tls/ticket_keys.h"

namespace sluice::detail {

namespace {

// What a sluice SSL_CTX carries besides OpenSSL's own state, freed with it (ex_data): the
// ticket keys (every context: OpenSSL asks the SSL's current context's owner) and, on a
// default context, its SNI table (one reference on each SNI context).
struct ctx_extras {
    std::shared_ptr<ticket_keys> tickets;
    std::vector<std::pair<std::string, SSL_CTX*>> names; // lower case; "*.x" wildcards
    std::vector<SSL_CTX*> owned;

    ctx_extras() = default;
    ctx_extras(const ctx_extras&) = delete;
    ctx_extras& operator=(const ctx_extras&) = delete;
    ~ctx_extras() {
        for (SSL_CTX* c : owned) {
            SSL_CTX_free(c);
        }
    }
};

void free_extras(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
    delete static_cast<ctx_extras*>(ptr);
}

// OpenSSL's ex_data slot for ctx_extras: allocated once per process (an index, not state).
int extras_index() {
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_extras);
    return index;
}

ctx_extras* extras_of(SSL_CTX* ctx) noexcept {
    return static_cast<ctx_extras*>(SSL_CTX_get_ex_data(ctx, extras_index()));
}

void attach_extras(SSL_CTX* ctx, std::unique_ptr<ctx_extras> extras) {
    if (SSL_CTX_set_ex_data(ctx, extras_index(), extras.get()) != 1) {
        throw startup_error("tls.cert", "cannot attach the TLS context's data: " + openssl_error());
    }
    extras.release(); // freed with ctx (free_extras)
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

// "*.example.com" matches "a.example.com", not "example.com" nor "a.b.example.com" (RFC 6125
// section 6.4.3: the wildcard covers one label, and an empty one is none). Exact names win
// over wildcards. A host name has no '*': such a name is nobody's.
SSL_CTX* find_by_name(const ctx_extras& extras, std::string_view name) noexcept {
    if (name.find('*') != std::string_view::npos) {
        return nullptr;
    }
    SSL_CTX* wildcard = nullptr;
    const std::size_t dot = name.find('.');
    for (const auto& [pattern, ctx] : extras.names) {
        if (pattern == name) {
            return ctx;
        }
        if (wildcard == nullptr && pattern.starts_with("*.") && dot != std::string_view::npos && dot > 0 &&
            name.substr(dot + 1) == std::string_view(pattern).substr(2)) {
            wildcard = ctx;
        }
    }
    return wildcard;
}

// The servername callback of a default context: switch the connection to the SNI entry's
// context. An unknown name, or none, keeps the default certificate (nginx's default_server)
// rather than end the handshake with an alert: the client decides whether it trusts it.
int choose_certificate(SSL* ssl, int*, void* arg) {
    const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (name == nullptr) {
        return SSL_TLSEXT_ERR_OK;
    }
    const auto* extras = static_cast<const ctx_extras*>(arg);
    std::string wanted;
    try {
        wanted = lower(name);
    } catch (...) {
        return SSL_TLSEXT_ERR_ALERT_FATAL; // out of memory
    }
    if (SSL_CTX* chosen = find_by_name(*extras, wanted)) {
        // Every context is made from the same settings (verify mode, ALPN, session id
        // context), so only the certificate changes; the session cache and the ticket callback
        // stay the default context's (OpenSSL's session_ctx).
        if (SSL_set_SSL_CTX(ssl, chosen) == nullptr) {
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
    }
    return SSL_TLSEXT_ERR_OK;
}

int on_ticket(SSL* ssl, unsigned char* name, unsigned char* iv, EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac,
              int enc) {
    const ctx_extras* extras = extras_of(SSL_get_SSL_CTX(ssl));
    if (extras == nullptr || !extras->tickets) {
        return -1;
    }
    const int r = extras->tickets->on_ticket(name, iv, cipher, mac, enc);
    // TLS 1.3: after a resumed handshake OpenSSL sends a new ticket only when the callback asks
    // for renewal (2). Without one, a client that uses each ticket once (RFC 8446 C.4) has
    // nothing to offer next time, and a chain of pooled connections resumes only once.
    if (enc == 0 && r == 1 && SSL_version(ssl) == TLS1_3_VERSION) {
        return 2;
    }
    return r;
}

std::shared_ptr<SSL_CTX> owned(SSL_CTX* ctx) {
    return std::shared_ptr<SSL_CTX>(ctx, SSL_CTX_free);
}

} // namespace

tls_context::tls_context(const tls_config& cfg, std::chrono::seconds ticket_rotation)
    : cfg_(cfg), tickets_(std::make_shared<ticket_keys>(ticket_rotation)) {
    current_ = build();
}

tls_context::~tls_context() = default;

std::shared_ptr<SSL_CTX> tls_context::build() const {
    // tls.client_ca read once for the whole set: every context verifies against the same CAs
    // and carries the session id context made from them (ssl_ctx_builder.h).
    const client_verification verification = read_client_verification(cfg_);
    std::shared_ptr<SSL_CTX> def =
        owned(make_server_ssl_ctx(cfg_, certificate_files{cfg_.cert, cfg_.key}, verification));
    auto extras = std::make_unique<ctx_extras>();
    extras->tickets = tickets_;
    for (std::size_t i = 0; i < cfg_.sni.size(); ++i) {
        const tls_sni_config& e = cfg_.sni[i];
        const std::string at = "tls.sni[" + std::to_string(i) + "]";
        std::shared_ptr<SSL_CTX> ctx =
            owned(make_server_ssl_ctx(cfg_, {e.cert, e.key, at + ".cert", at + ".key"}, verification));
        auto sni_extras = std::make_unique<ctx_extras>();
        sni_extras->tickets = tickets_;
        attach_extras(ctx.get(), std::move(sni_extras));
        for (const std::string& n : e.names) {
            extras->names.emplace_back(lower(n), ctx.get());
        }
        SSL_CTX_up_ref(ctx.get());
        extras->owned.push_back(ctx.get());
    }
    if (SSL_CTX_set_tlsext_ticket_key_evp_cb(def.get(), on_ticket) != 1) {
        throw startup_error("tls.cert", "cannot install the session ticket keys: " + openssl_error());
    }
    if (!extras->names.empty()) {
        // The macro SSL_CTX_set_tlsext_servername_callback casts C-style; the call it stands for:
        SSL_CTX_callback_ctrl(def.get(), SSL_CTRL_SET_TLSEXT_SERVERNAME_CB,
                              reinterpret_cast<void (*)()>(choose_certificate));
        SSL_CTX_set_tlsext_servername_arg(def.get(), extras.get());
    }
    attach_extras(def.get(), std::move(extras));
    return def;
}

ssl_st* tls_context::new_ssl() const noexcept {
    std::shared_ptr<SSL_CTX> ctx;
    {
        std::lock_guard lock(mu_);
        ctx = current_;
    }
    // SSL_new takes its own reference: the context outlives a reload while the SSL lives.
    return SSL_new(ctx.get());
}

void tls_context::reload() {
    std::lock_guard serial(reload_mu_);
    std::shared_ptr<SSL_CTX> next = build(); // throws: the current contexts stay
    std::lock_guard lock(mu_);
    current_.swap(next);
    // `next` (the old set) is released here, after the lock: its last SSL frees it.
}

} // namespace sluice::detail
