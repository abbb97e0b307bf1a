#include "support/fake_upstream.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "support/test_certs.h"

namespace sluice::test {

std::optional<std::string> upstream_conn::read_request(std::chrono::milliseconds timeout) {
    const auto deadline = test_clock::now() + timeout;
    for (;;) {
        const auto end = in_.find("\r\n\r\n");
        if (end != std::string::npos) {
            std::size_t len = 0;
            // Content-Length, case-insensitively (enough for the client's own requests).
            std::string lower = in_.substr(0, end);
            for (auto& ch : lower) {
                ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            }
            const auto cl = lower.find("\r\ncontent-length:");
            if (cl != std::string::npos) {
                len = std::strtoul(lower.c_str() + cl + 17, nullptr, 10);
            }
            if (in_.size() >= end + 4 + len) {
                std::string req = in_.substr(0, end + 4 + len);
                in_.erase(0, end + 4 + len);
                return req;
            }
        }
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
            return std::nullopt;
        }
        char buf[16384];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) {
            return std::nullopt;
        }
        in_.append(buf, static_cast<std::size_t>(n));
    }
}

std::string upstream_conn::read_some(std::chrono::milliseconds timeout) {
    if (!in_.empty()) {
        return std::exchange(in_, std::string());
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
        return {};
    }
    char buf[16384];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

bool upstream_conn::write(std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

bool upstream_conn::wait_closed(std::chrono::milliseconds timeout) {
    const auto deadline = test_clock::now() + timeout;
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
            return false;
        }
        char buf[4096];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n <= 0) {
            return true;
        }
    }
}

void upstream_conn::reset() noexcept {
    linger l{1, 0};
    (void)::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::shutdown(fd_, SHUT_RDWR);
}

upstream_tls::upstream_tls(upstream_conn& c, std::chrono::seconds timeout) : conn_(c) {
    const timeval tv{static_cast<time_t>(timeout.count()), 0};
    (void)::setsockopt(c.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)::setsockopt(c.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ctx_ = SSL_CTX_new(TLS_server_method());
    if (ctx_ == nullptr ||
        SSL_CTX_use_certificate_chain_file(ctx_, shared_test_certs().cert_path().c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, shared_test_certs().key_path().c_str(), SSL_FILETYPE_PEM) != 1) {
        return;
    }
    ssl_ = SSL_new(ctx_);
    if (ssl_ != nullptr && (SSL_set_fd(ssl_, c.fd()) != 1 || SSL_accept(ssl_) != 1)) {
        SSL_free(ssl_);
        ssl_ = nullptr;
    }
}

upstream_tls::~upstream_tls() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
}

std::optional<std::string> upstream_tls::read_head() {
    if (ssl_ == nullptr) {
        return std::nullopt;
    }
    std::string head;
    char buf[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
        const int n = SSL_read(ssl_, buf, sizeof buf);
        if (n <= 0) {
            return std::nullopt;
        }
        head.append(buf, static_cast<std::size_t>(n));
    }
    return head;
}

std::string upstream_tls::read_some(std::size_t max) {
    std::string out(std::min<std::size_t>(max, 1 << 20), '\0');
    const int n = ssl_ == nullptr ? 0 : SSL_read(ssl_, out.data(), static_cast<int>(out.size()));
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
}

bool upstream_tls::write(std::string_view bytes) {
    while (ssl_ != nullptr && !bytes.empty()) {
        const int n =
            SSL_write(ssl_, bytes.data(), static_cast<int>(std::min<std::size_t>(bytes.size(), 1 << 20)));
        if (n <= 0) {
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return ssl_ != nullptr;
}

void upstream_tls::close_notify() noexcept {
    if (ssl_ != nullptr) {
        (void)SSL_shutdown(ssl_);
    }
    ::shutdown(conn_.fd(), SHUT_WR);
}

void upstream_tls::bare_fin() noexcept {
    ::shutdown(conn_.fd(), SHUT_WR);
}

fake_upstream::fake_upstream(script s, int backlog) : script_(std::move(s)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    (void)::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, backlog) != 0) {
        std::abort();
    }
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
}

fake_upstream::~fake_upstream() {
    stop_ = true;
    acceptor_.join();
    {
        std::lock_guard lock(mu_);
        for (int fd : fds_) {
            if (fd >= 0) {
                ::shutdown(fd, SHUT_RDWR); // wakes scripts blocked in poll
            }
        }
    }
    for (auto& t : conns_) {
        t.join();
    }
    ::close(listen_fd_);
}

void fake_upstream::accept_loop() {
    while (!stop_) {
        if (paused_) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
        }
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) {
            continue;
        }
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        ++accepted_;
        std::lock_guard lock(mu_);
        fds_.push_back(fd);
        const std::size_t slot = fds_.size() - 1;
        conns_.emplace_back([this, fd, slot] {
            upstream_conn c(fd);
            script_(c);
            // The script returned: close now, so the fd count of the process comes back.
            std::lock_guard held(mu_);
            ::close(fd);
            fds_[slot] = -1;
            ++closed_;
        });
    }
}

void answer_all(upstream_conn& c) {
    while (c.read_request()) {
        if (!c.write(upstream_response(200, "ok"))) {
            return;
        }
    }
}

std::string upstream_response(int status, std::string_view body, std::string_view extra_headers) {
    std::string r = "HTTP/1.1 " + std::to_string(status) +
                    " X\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    r.append(extra_headers);
    r.append("\r\n");
    r.append(body);
    return r;
}

int open_fd_count() {
    int n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (const dirent* e = ::readdir(d)) {
            if (e->d_name[0] != '.') {
                ++n;
            }
        }
        ::closedir(d);
    }
    return n - 1; // the directory's own fd
}

} // namespace sluice::test
