#include "support/test_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "support/test_certs.h"

namespace sluice::test {

test_client::test_client(std::uint16_t port, std::chrono::milliseconds timeout, client_transport transport,
                         client_handshake handshake, client_socket_options options)
    : timeout_(timeout) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(std::string("socket: ") + std::strerror(errno));
        return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (options.rcvbuf > 0) {
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &options.rcvbuf, sizeof options.rcvbuf);
    }
    if (options.mss > 0) {
        ::setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &options.mss, sizeof options.mss);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0 && errno != EINPROGRESS) {
        fail(std::string("connect: ") + std::strerror(errno));
        ::close(fd);
        return;
    }
    pollfd p{fd, POLLOUT, 0};
    const auto deadline = test_clock::now() + timeout_;
    int rc = 0;
    do {
        rc = ::poll(&p, 1, remaining_ms(deadline));
    } while (rc < 0 && errno == EINTR);
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (rc <= 0 || err != 0) {
        fail(rc == 0 ? "connect timed out"
                     : std::string("connect: ") + std::strerror(err != 0 ? err : errno));
        ::close(fd);
        return;
    }
    if (transport != client_transport::plain) {
        std::optional<std::string> ca = tls_ca_for_port(port);
        if (transport == client_transport::tls && !ca) {
            ca = shared_test_certs().cert_path();
        }
        if (ca) {
            std::string why;
            tls_ = handshake == client_handshake::at_connect ? tls_stream::connect(fd, *ca, deadline, why)
                                                             : tls_stream::attach(fd, *ca, why);
            if (tls_ == nullptr) {
                fail(why);
                ::close(fd);
                return;
            }
        }
    }
    fd_ = fd;
}

test_client::~test_client() {
    close_clean();
}

void test_client::fail(std::string what) {
    error_ = std::move(what);
    if (!in_.empty()) {
        error_ += "; buffered: \"" + printable(in_) + "\"";
    }
}

bool test_client::write_all(std::string_view bytes, test_clock::time_point deadline) {
    if (fd_ < 0) {
        fail("not connected");
        return false;
    }
    while (tls_ && !bytes.empty()) {
        std::size_t put = 0;
        const auto r = tls_->write(bytes.data(), bytes.size(), put);
        if (r == tls_stream::result::ok) {
            bytes.remove_prefix(put);
            continue;
        }
        if (r == tls_stream::result::want_read || r == tls_stream::result::want_write) {
            pollfd p{fd_, static_cast<short>(r == tls_stream::result::want_read ? POLLIN : POLLOUT), 0};
            if (::poll(&p, 1, remaining_ms(deadline)) == 0) {
                fail("send timed out (the server does not read)");
                return false;
            }
            continue;
        }
        fail("TLS send: " + (r == tls_stream::result::eof ? std::string("closed") : tls_->error()));
        return false;
    }
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd_, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms(deadline)) == 0) {
                fail("send timed out (the server does not read)");
                return false;
            }
            continue;
        }
        fail(std::string("send: ") + std::strerror(errno));
        return false;
    }
    return true;
}

bool test_client::send(std::string_view bytes) {
    return write_all(bytes, test_clock::now() + timeout_);
}

bool test_client::send_split(std::string_view bytes, std::size_t piece, std::chrono::milliseconds pause) {
    const auto deadline = test_clock::now() + timeout_;
    while (!bytes.empty()) {
        const std::size_t n = std::min(piece, bytes.size());
        if (!write_all(bytes.substr(0, n), deadline)) {
            return false;
        }
        bytes.remove_prefix(n);
        if (!bytes.empty() && pause.count() > 0) {
            std::this_thread::sleep_for(pause);
        }
    }
    return true;
}

std::string test_client::read_available(std::chrono::milliseconds wait) {
    if (in_.empty()) {
        (void)fill_once(test_clock::now() + wait);
    }
    return std::exchange(in_, std::string());
}

test_client::fill test_client::fill_once(test_clock::time_point deadline) {
    if (fd_ < 0) {
        fail("not connected");
        return fill::failed;
    }
    if (eof_) {
        return fill::eof;
    }
    while (tls_) {
        char buf[16384];
        std::size_t got = 0;
        const auto r = tls_->read(buf, sizeof buf, got);
        if (r == tls_stream::result::ok) {
            in_.append(buf, got);
            return fill::data;
        }
        if (r == tls_stream::result::eof || r == tls_stream::result::failed) {
            eof_ = true; // a fatal alert ends the stream as a reset does
            clean_end_ = tls_->close_notify_received();
            return fill::eof;
        }
        if (const fill w = await_ready(r == tls_stream::result::want_read ? POLLIN : POLLOUT, deadline);
            w != fill::data) {
            return w;
        }
    }
    while (true) {
        char buf[16384];
        const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n > 0) {
            in_.append(buf, static_cast<std::size_t>(n));
            return fill::data;
        }
        if (n == 0 || (errno == ECONNRESET || errno == EPIPE)) {
            eof_ = true;
            clean_end_ = n == 0;
            return fill::eof;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            fail(std::string("recv: ") + std::strerror(errno));
            return fill::failed;
        }
        if (const fill w = await_ready(POLLIN, deadline); w != fill::data) {
            return w;
        }
    }
}

test_client::fill test_client::await_ready(short events, test_clock::time_point deadline) {
    pollfd p{fd_, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc == 0) {
        return fill::timeout;
    }
    if (rc < 0 && errno != EINTR) {
        fail(std::string("poll: ") + std::strerror(errno));
        return fill::failed;
    }
    return fill::data; // ready (or interrupted): the caller reads again
}

std::optional<http_response> test_client::read_response(body_rule rule) {
    const auto deadline = test_clock::now() + timeout_;
    while (true) {
        parse_outcome out = parse_response(in_, eof_, rule);
        if (out.status == parse_status::complete) {
            in_.erase(0, out.consumed);
            return std::move(out.response);
        }
        if (out.status == parse_status::malformed) {
            fail("malformed response: " + out.error);
            return std::nullopt;
        }
        if (eof_) {
            fail(in_.empty() ? "connection closed by the server, no response"
                             : "connection closed by the server inside a response");
            return std::nullopt;
        }
        switch (fill_once(deadline)) {
        case fill::data:
        case fill::eof:
            break;
        case fill::timeout:
            fail("timed out after " + std::to_string(timeout_.count()) + " ms waiting for a response");
            return std::nullopt;
        case fill::failed:
            return std::nullopt;
        }
    }
}

std::vector<http_response> test_client::read_responses(std::size_t n) {
    std::vector<http_response> out;
    for (std::size_t i = 0; i < n; ++i) {
        auto r = read_response();
        if (!r) {
            error_ = "response " + std::to_string(i + 1) + " of " + std::to_string(n) + ": " + error_;
            break;
        }
        out.push_back(std::move(*r));
    }
    return out;
}

bool test_client::read_until_contains(std::string_view text) {
    const auto deadline = test_clock::now() + timeout_;
    while (in_.find(text) == std::string::npos) {
        const fill f = fill_once(deadline);
        if (f == fill::eof || f == fill::timeout || f == fill::failed) {
            if (f != fill::failed) {
                fail("waiting for \"" + printable(text) + "\": " + (f == fill::eof ? "closed" : "timed out"));
            }
            return false;
        }
    }
    return true;
}

bool test_client::wait_closed() {
    const auto deadline = test_clock::now() + timeout_;
    while (true) {
        switch (fill_once(deadline)) {
        case fill::data:
            break;
        case fill::eof:
            return true;
        case fill::timeout:
            fail("the server did not close the connection within " + std::to_string(timeout_.count()) +
                 " ms");
            return false;
        case fill::failed:
            return false;
        }
    }
}

std::size_t test_client::read_for(std::chrono::milliseconds window) {
    const std::size_t before = in_.size();
    const auto deadline = test_clock::now() + window;
    while (test_clock::now() < deadline) {
        const fill f = fill_once(deadline);
        if (f != fill::data) {
            break;
        }
    }
    return in_.size() - before;
}

void test_client::close_clean() noexcept {
    if (tls_ && fd_ >= 0) {
        tls_->close_notify();
    }
    tls_.reset();
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

void test_client::close_abortive() noexcept {
    if (fd_ >= 0) {
        const linger l{1, 0};
        ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        tls_.reset();
        ::close(fd_);
        fd_ = -1;
    }
}

void test_client::shutdown_write() noexcept {
    if (fd_ >= 0) {
        if (tls_) {
            tls_->close_notify(); // TLS's half-close (RFC 8446 6.1), then TCP's
        }
        ::shutdown(fd_, SHUT_WR);
    }
}

std::string get_request(std::string_view target, std::string_view extra_headers) {
    std::string r = "GET ";
    r.append(target).append(" HTTP/1.1\r\nHost: test\r\n").append(extra_headers).append("\r\n");
    return r;
}

std::string body_request(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra_headers) {
    std::string r(method);
    r.append(" ").append(target).append(" HTTP/1.1\r\nHost: test\r\nContent-Length: ");
    r.append(std::to_string(body.size())).append("\r\n").append(extra_headers).append("\r\n").append(body);
    return r;
}

} // namespace sluice::test
