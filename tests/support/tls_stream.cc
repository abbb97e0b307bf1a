#include "support/tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>

#include <csignal>
#include <map>
#include <mutex>

namespace sluice::test {

namespace {

std::mutex ports_mu;
std::map<std::uint16_t, std::string>& ports() {
    static std::map<std::uint16_t, std::string> m;
    return m;
}

std::string last_error() {
    unsigned long last = 0;
    while (const unsigned long e = ERR_get_error()) {
        last = e;
    }
    if (last == 0) {
        return "no OpenSSL error queued";
    }
    char text[256];
    ERR_error_string_n(last, text, sizeof text);
    return text;
}

} // namespace

void register_tls_port(std::uint16_t port, const std::string& ca_file) {
    std::lock_guard lock(ports_mu);
    ports()[port] = ca_file;
}

void unregister_tls_port(std::uint16_t port) {
    std::lock_guard lock(ports_mu);
    ports().erase(port);
}

std::optional<std::string> tls_ca_for_port(std::uint16_t port) {
    std::lock_guard lock(ports_mu);
    auto it = ports().find(port);
    if (it == ports().end()) {
        return std::nullopt;
    }
    return it->second;
}

namespace {

// One client context per CA file for the whole program: loading the CA for every connection
// costs more than the handshake, and multi_client opens thousands.
SSL_CTX* client_context(const std::string& ca_file, std::string& error) {
    static std::mutex mu;
    // Never destroyed, so the contexts stay reachable at exit (a static map would be destroyed
    // first, and LeakSanitizer would report every context it held).
    static auto& contexts = *new std::map<std::string, SSL_CTX*>;
    std::lock_guard lock(mu);
    if (auto it = contexts.find(ca_file); it != contexts.end()) {
        return it->second;
    }
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == nullptr) {
        error = "SSL_CTX_new: " + last_error();
        return nullptr;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
        error = "CA file " + ca_file + ": " + last_error();
        SSL_CTX_free(ctx);
        return nullptr;
    }
    contexts.emplace(ca_file, ctx);
    return ctx;
}

} // namespace

std::unique_ptr<tls_stream> tls_stream::attach(int fd, const std::string& ca_file, std::string& error) {
    // OpenSSL's socket BIO writes with write(), not send(MSG_NOSIGNAL): a server that closed
    // first would kill the test program with SIGPIPE instead of failing a send.
    static const bool sigpipe_ignored = [] { return std::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
    (void)sigpipe_ignored;
    SSL_CTX* ctx = client_context(ca_file, error);
    if (ctx == nullptr) {
        return nullptr;
    }
    std::unique_ptr<tls_stream> s(new tls_stream);
    s->ssl_ = SSL_new(ctx);
    if (s->ssl_ == nullptr) {
        error = "SSL_new: " + last_error();
        return nullptr;
    }
    SSL_set_fd(s->ssl_, fd);
    SSL_set_connect_state(s->ssl_);
    // SSL_set_tlsext_host_name is a macro with a C cast; its function form says the same.
    static char sni[] = "localhost";
    SSL_ctrl(s->ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, sni);
    SSL_set1_host(s->ssl_, "localhost");
    return s;
}

std::unique_ptr<tls_stream> tls_stream::connect(int fd, const std::string& ca_file,
                                                test_clock::time_point deadline, std::string& error) {
    auto s = attach(fd, ca_file, error);
    if (!s) {
        return nullptr;
    }
    for (;;) {
        ERR_clear_error();
        const int rc = SSL_connect(s->ssl_);
        if (rc == 1) {
            return s;
        }
        const int err = SSL_get_error(s->ssl_, rc);
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            error = "TLS handshake failed: " + last_error();
            return nullptr;
        }
        pollfd p{fd, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
        if (::poll(&p, 1, remaining_ms(deadline)) == 0) {
            error = "TLS handshake timed out";
            return nullptr;
        }
    }
}

tls_stream::~tls_stream() {
    SSL_free(ssl_);
}

tls_stream::result tls_stream::classify(int rc) {
    const int err = SSL_get_error(ssl_, rc);
    switch (err) {
    case SSL_ERROR_WANT_READ:
        return result::want_read;
    case SSL_ERROR_WANT_WRITE:
        return result::want_write;
    case SSL_ERROR_ZERO_RETURN:
        return result::eof;
    case SSL_ERROR_SYSCALL:
        // EOF without close_notify, or a reset: the server closed, as a plain recv() sees it.
        ERR_clear_error();
        return result::eof;
    default:
        error_ = last_error();
        // A fatal alert from the server (it refused something) ends the stream too.
        return result::failed;
    }
}

tls_stream::result tls_stream::read(char* buf, std::size_t len, std::size_t& got) {
    ERR_clear_error();
    const int rc = SSL_read_ex(ssl_, buf, len, &got);
    return rc == 1 ? result::ok : classify(rc);
}

tls_stream::result tls_stream::write(const char* buf, std::size_t len, std::size_t& put) {
    ERR_clear_error();
    const int rc = SSL_write_ex(ssl_, buf, len, &put);
    return rc == 1 ? result::ok : classify(rc);
}

bool tls_stream::close_notify_received() const noexcept {
    return (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0;
}

void tls_stream::close_notify() {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
}

} // namespace sluice::test
