#include "support/tls_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

namespace sluice::test {

namespace {

std::string last_error(const char* what) {
    std::string out = what;
    while (const unsigned long e = ERR_get_error()) {
        char text[256];
        ERR_error_string_n(e, text, sizeof text);
        out += ": ";
        out += text;
    }
    return out;
}

void describe_peer(SSL* ssl, tls_probe_result& out) {
    X509* cert = SSL_get1_peer_certificate(ssl);
    if (cert == nullptr) {
        return;
    }
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    out.subject_cn = cn;
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
    char* hex = BN_bn2hex(bn);
    out.serial = hex;
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(cert);
}

int connect_loopback(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    // Every blocking step below ends within 10 s: a hung server fails the test, not the run.
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        // With SO_SNDTIMEO set, a connect interrupted by a signal is not restarted (signal(7)):
        // it fails with EINTR (or EINPROGRESS at the timeout) and goes on in the background.
        // Wait for it to finish rather than fail the case.
        if (errno != EINTR && errno != EINPROGRESS) {
            ::close(fd);
            return -1;
        }
        pollfd p{fd, POLLOUT, 0};
        int rc = 0;
        do {
            rc = ::poll(&p, 1, 10'000);
        } while (rc < 0 && errno == EINTR);
        int err = 0;
        socklen_t len = sizeof err;
        if (rc <= 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            ::close(fd);
            return -1;
        }
    }
    return fd;
}

// A socket with SO_RCVTIMEO is not restarted after a signal handler (signal(7)): recv fails
// with EINTR, which OpenSSL reports as WANT_READ. Such a step is tried again, up to 10 s.
template <class F>
int retrying(SSL* ssl, F step) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        errno = 0;
        const int rc = step();
        if (rc > 0) {
            return rc;
        }
        const int code = SSL_get_error(ssl, rc);
        if ((code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE) || errno != EINTR ||
            std::chrono::steady_clock::now() >= deadline) {
            return rc;
        }
    }
}

void run(SSL* ssl, const tls_probe_options& options, tls_probe_result& out) {
    if (retrying(ssl, [&] { return SSL_connect(ssl); }) != 1) {
        out.error = last_error("handshake");
        return;
    }
    out.handshake_done = true;
    out.reused = SSL_session_reused(ssl) == 1;
    describe_peer(ssl, out);
    std::string request;
    for (int i = 1; i <= options.requests; ++i) {
        request += "GET " + options.path + " HTTP/1.1\r\nHost: localhost\r\n";
        request += i == options.requests ? "Connection: close\r\n\r\n" : "\r\n";
    }
    if (retrying(ssl, [&] { return SSL_write(ssl, request.data(), static_cast<int>(request.size())); }) <=
        0) {
        out.error = last_error("write");
        return;
    }
    char buf[4096];
    for (;;) {
        const int n = retrying(ssl, [&] { return SSL_read(ssl, buf, sizeof buf); });
        if (n <= 0) {
            const int code = SSL_get_error(ssl, n);
            if (code != SSL_ERROR_ZERO_RETURN && code != SSL_ERROR_SYSCALL) {
                out.error = last_error(("read (SSL_get_error " + std::to_string(code) + ")").c_str());
            } else if (out.response.empty()) {
                out.error = code == SSL_ERROR_ZERO_RETURN ? "close_notify before any answer"
                                                          : "connection closed before any answer";
            }
            break;
        }
        out.response.append(buf, static_cast<std::size_t>(n));
    }
    out.answered = out.response.starts_with("HTTP/1.1 ");
    // Without a close_notify sent, OpenSSL marks the session not resumable when the SSL is
    // freed (ssl_clear_bad_session): a client that means to come back says goodbye.
    SSL_shutdown(ssl);
    // Read to the end: TLS 1.3 tickets arrive after the handshake, so only now is the session
    // one a later connection can resume.
    out.session = tls_session(SSL_get1_session(ssl), SSL_SESSION_free);
}

} // namespace

tls_probe_result tls_probe(std::uint16_t port, const tls_probe_options& options) {
    tls_probe_result out;
    ERR_clear_error();
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (options.version != 0) {
        SSL_CTX_set_min_proto_version(ctx, options.version);
        SSL_CTX_set_max_proto_version(ctx, options.version);
    }
    // The tests look at the certificate the server chose rather than verify it.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    if (!options.client_cert.empty() &&
        (SSL_CTX_use_certificate_chain_file(ctx, options.client_cert.c_str()) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx, options.client_key.c_str(), SSL_FILETYPE_PEM) != 1)) {
        out.error = last_error("client certificate");
        SSL_CTX_free(ctx);
        return out;
    }
    const int fd = connect_loopback(port);
    if (fd < 0) {
        out.error = "connect failed";
        SSL_CTX_free(ctx);
        return out;
    }
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (!options.sni.empty()) {
        // SSL_set_tlsext_host_name is a macro with a C-style cast; the call it stands for:
        SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                 const_cast<char*>(options.sni.c_str()));
    }
    if (options.session) {
        SSL_set_session(ssl, options.session.get());
    }
    run(ssl, options, out);
    SSL_free(ssl);
    ::close(fd);
    SSL_CTX_free(ctx);
    return out;
}

} // namespace sluice::test
