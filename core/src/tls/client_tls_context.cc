#include "tls/client_tls_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <stdexcept>

#include <sluice/error.h>

#include "client/upstream.h"
#include "tls/ssl_ctx_builder.h"

namespace sluice::detail {

namespace {

std::string openssl_reason() {
    unsigned long first = ERR_peek_error();
    if (first == 0) {
        return "no reason given";
    }
    char text[256];
    ERR_error_string_n(first, text, sizeof text);
    return text;
}

bool is_ip_literal(const std::string& host) {
    unsigned char buf[16];
    return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The certificate offered to an upstream that asks for one (mutual TLS), checked now as a
// server's is at startup, so that a bad file fails the constructor, not the first call.
void load_client_certificate(SSL_CTX* ctx, const client_tls_options& o) {
    if (o.cert_file.empty() || o.key_file.empty()) {
        throw std::invalid_argument(o.cert_file.empty() ? "client.tls.cert_file: empty, but key_file is set"
                                                        : "client.tls.key_file: empty, but cert_file is set");
    }
    SSL_CTX_set_default_passwd_cb(ctx, no_password);
    try {
        load_certificate(ctx, {.cert = o.cert_file,
                               .key = o.key_file,
                               .cert_key = "client.tls.cert_file",
                               .key_key = "client.tls.key_file"});
    } catch (const startup_error& e) {
        ERR_clear_error();
        throw std::invalid_argument(e.what()); // the client's constructor error type
    }
}

} // namespace

client_tls_context::client_tls_context(const client_tls_options& o, const upstream_state& up, logger log)
    : options_(o), log_(std::move(log)) {
    ERR_clear_error();
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (ctx_ == nullptr) {
        throw std::bad_alloc();
    }
    // Everything below can throw: the destructor would not run, so free on the way out.
    struct guard {
        ssl_ctx_st*& c;
        bool armed = true;
        ~guard() {
            if (armed) {
                SSL_CTX_free(c);
                c = nullptr;
            }
        }
    } g{ctx_};
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx_, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx_, SSL_MODE_RELEASE_BUFFERS);
    static constexpr unsigned char http11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx_, http11, sizeof http11);
    if (o.verify == tls_verify::peer) {
        const bool loaded = o.ca_file.empty()
                                ? SSL_CTX_set_default_verify_paths(ctx_) == 1
                                : SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr) == 1;
        if (!loaded) {
            const std::string why = openssl_reason();
            ERR_clear_error();
            throw std::invalid_argument("client.tls.ca_file '" + o.ca_file +
                                        "': cannot load the CAs: " + why);
        }
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    } else {
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    }
    if (!o.cert_file.empty() || !o.key_file.empty()) {
        load_client_certificate(ctx_, o);
    }
    // The client keeps sessions itself, one per address (the new-session callback): OpenSSL's
    // internal cache is for servers, and a client looks up by address, not by session id.
    SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx_, &client_tls_context::on_new_session);

    std::string https;
    for (const auto& a : up.hosts()) {
        auto s = std::make_unique<slot>();
        s->name = a.name;
        s->checked = o.server_name.empty() ? a.host : o.server_name;
        s->ip = is_ip_literal(s->checked);
        if (a.tls) {
            https += (https.empty() ? "" : ", ") + std::string("https://") + a.name;
        }
        slots_.push_back(std::move(s));
    }
    g.armed = false;
    if (o.verify == tls_verify::none) {
        log_.warn("client: TLS peer verification is off for {}: the certificate is not checked, anyone "
                  "on the path can read and change this traffic",
                  https);
    }
}

client_tls_context::~client_tls_context() {
    for (auto& s : slots_) {
        SSL_SESSION_free(s->session);
    }
    SSL_CTX_free(ctx_);
}

ssl_st* client_tls_context::new_ssl(std::size_t address) noexcept {
    if (address >= slots_.size()) {
        return nullptr;
    }
    slot& sl = *slots_[address];
    ERR_clear_error();
    SSL* ssl = SSL_new(ctx_);
    if (ssl == nullptr) {
        ERR_clear_error();
        return nullptr;
    }
    SSL_set_connect_state(ssl);
    SSL_set_app_data(ssl, &sl);
    bool ok = true;
    if (!sl.ip) {
        // SSL_set_tlsext_host_name() is a macro with a C cast; this is what it expands to.
        ok = SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                      const_cast<char*>(sl.checked.c_str())) == 1;
    }
    if (ok && options_.verify == tls_verify::peer) {
        if (sl.ip) {
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), sl.checked.c_str()) == 1;
        } else {
            // RFC 6125: a wildcard stands for one whole label only.
            SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            ok = SSL_set1_host(ssl, sl.checked.c_str()) == 1;
        }
    }
    if (ok) {
        std::lock_guard lock(sl.mu);
        if (sl.session != nullptr) {
            ok = SSL_set_session(ssl, sl.session) == 1;
        }
    }
    if (!ok) {
        ERR_clear_error();
        SSL_free(ssl);
        return nullptr;
    }
    return ssl;
}

int client_tls_context::on_new_session(ssl_st* ssl, ssl_session_st* session) {
    auto* sl = static_cast<slot*>(SSL_get_app_data(ssl));
    if (sl == nullptr || SSL_SESSION_is_resumable(session) != 1) {
        return 0; // not kept: OpenSSL frees it
    }
    SSL_SESSION* old = nullptr;
    {
        std::lock_guard lock(sl->mu);
        old = sl->session;
        sl->session = session; // the newest: a TLS 1.3 server may send several tickets
    }
    SSL_SESSION_free(old);
    return 1; // ours now
}

void client_tls_context::handshake_done(ssl_st* ssl) noexcept {
    handshakes_.fetch_add(1, std::memory_order_relaxed);
    if (SSL_session_reused(ssl) == 1) {
        resumed_.fetch_add(1, std::memory_order_relaxed);
    }
}

int client_tls_context::handshake_failed(ssl_st* ssl) noexcept {
    const auto* sl = static_cast<const slot*>(SSL_get_app_data(ssl));
    const long v = SSL_get_verify_result(ssl);
    try {
        if (options_.verify == tls_verify::peer && v != X509_V_OK) {
            log_.warn("client: TLS to https://{}: certificate rejected ({} expected): {}", sl->name,
                      sl->checked, X509_verify_cert_error_string(v));
            return -EKEYREJECTED;
        }
        log_.warn("client: TLS handshake with https://{} failed: {}", sl->name, openssl_reason());
    } catch (...) {
        // Out of memory while logging: the error code still says what happened.
    }
    return v != X509_V_OK && options_.verify == tls_verify::peer ? -EKEYREJECTED : -EPROTO;
}

void client_tls_context::refused_after_handshake(ssl_st* ssl) noexcept {
    const auto* sl = static_cast<const slot*>(SSL_get_app_data(ssl));
    try {
        log_.warn("client: TLS with https://{} failed after the handshake{}: {}", sl->name,
                  options_.cert_file.empty() ? " (no client certificate configured)" : "", openssl_reason());
    } catch (...) {
        // Out of memory while logging: the call's error still says what happened.
    }
}

} // namespace sluice::detail
