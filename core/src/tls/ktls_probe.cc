#include "tls/ktls_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::detail {

namespace {

struct fd_guard {
    int fd = -1;
    ~fd_guard() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

// The tls ULP attaches only to an established TCP connection (ENOTCONN otherwise), so the probe
// makes one to itself on 127.0.0.1. ENOENT: the kernel has no "tls" module (CONFIG_TLS off or
// not loadable).
int try_tls_ulp() noexcept {
    fd_guard listener{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    fd_guard client{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (listener.fd < 0 || client.fd < 0) {
        return errno;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener.fd, 1) != 0 ||
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        return errno;
    }
    fd_guard accepted{::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC)};
    if (accepted.fd < 0) {
        return errno;
    }
    static constexpr char ulp[] = "tls";
    if (::setsockopt(accepted.fd, IPPROTO_TCP, TCP_ULP, ulp, sizeof ulp - 1) != 0) {
        return errno;
    }
    return 0;
}

} // namespace

std::string ktls_support::describe() const {
    if (usable()) {
        return "kTLS available";
    }
    std::string why;
    if (!openssl) {
        why = "OpenSSL is built without kTLS";
    } else if (!kernel) {
        why = "the kernel has no tls ULP (setsockopt TCP_ULP \"tls\": " + kernel_error + ")";
    } else {
        why = "sluice's TLS driver does not hand records to the kernel yet (its BIO answers the kTLS "
              "controls 'not supported')";
    }
    return "kTLS unavailable: " + why + ", userspace TLS";
}

ktls_support probe_ktls() noexcept {
    ktls_support out;
#if defined(SSL_OP_ENABLE_KTLS) && !defined(OPENSSL_NO_KTLS)
    out.openssl = true;
#endif
    const int err = try_tls_ulp();
    out.kernel = err == 0;
    if (err != 0) {
        try {
            out.kernel_error = std::strerror(err);
        } catch (...) {
            // the reason stays empty: the verdict is what matters
        }
    }
    out.driver = false; // tls_bio.cc: no BIO_CTRL_GET_KTLS_SEND / _RECV
    return out;
}

} // namespace sluice::detail
