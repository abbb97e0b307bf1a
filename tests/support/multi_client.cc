#include "support/multi_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/deadline.h"

namespace sluice::test {

multi_client::~multi_client() {
    for (auto& c : conns_) {
        if (c.fd >= 0) {
            ::close(c.fd);
        }
    }
}

std::size_t multi_client::add(std::uint16_t port, std::string request) {
    conn c;
    c.out = std::move(request);
    c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
        c.error = std::string("socket: ") + std::strerror(errno);
    } else {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) {
            c.connected = true;
        } else if (errno != EINPROGRESS) {
            c.error = std::string("connect: ") + std::strerror(errno);
        }
        if (c.error.empty()) {
            if (const auto ca = tls_ca_for_port(port)) {
                std::string why;
                c.tls = tls_stream::attach(c.fd, *ca, why);
                if (!c.tls) {
                    c.error = why;
                }
            }
        }
    }
    conns_.push_back(std::move(c));
    return conns_.size() - 1;
}

void multi_client::step_send(conn& c) {
    if (!c.connected) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            c.error = std::string("connect: ") + std::strerror(err);
            return;
        }
        c.connected = true;
    }
    if (c.tls) {
        step_send_tls(c);
        return;
    }
    while (c.out_off < c.out.size()) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c.out_off += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                c.error = std::string("send: ") + std::strerror(errno);
            }
            return;
        }
    }
}

void multi_client::step_send_tls(conn& c) {
    c.want = 0;
    while (c.out_off < c.out.size()) {
        std::size_t put = 0;
        switch (c.tls->write(c.out.data() + c.out_off, c.out.size() - c.out_off, put)) {
        case tls_stream::result::ok:
            c.out_off += put;
            break;
        case tls_stream::result::want_read:
            c.want = POLLIN; // still handshaking
            return;
        case tls_stream::result::want_write:
            c.want = POLLOUT;
            return;
        case tls_stream::result::eof:
            c.error = "TLS: closed by the server while sending";
            return;
        case tls_stream::result::failed:
            c.error = "TLS: " + c.tls->error();
            return;
        }
    }
}

bool multi_client::read_tls(conn& c) {
    c.want = 0;
    while (true) {
        char buf[4096];
        std::size_t got = 0;
        switch (c.tls->read(buf, sizeof buf, got)) {
        case tls_stream::result::ok:
            c.in.append(buf, got);
            continue;
        case tls_stream::result::want_read:
            return false;
        case tls_stream::result::want_write:
            c.want = POLLOUT;
            return false;
        case tls_stream::result::eof:
            return true;
        case tls_stream::result::failed:
            c.error = "TLS: " + c.tls->error();
            return false;
        }
    }
}

void multi_client::step_read(conn& c) {
    bool eof = false;
    if (c.tls) {
        eof = read_tls(c);
        if (!c.error.empty()) {
            return;
        }
    }
    while (!c.tls) {
        char buf[4096];
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n > 0) {
            c.in.append(buf, static_cast<std::size_t>(n));
            continue;
        }
        if (n == 0 || errno == ECONNRESET) {
            eof = true;
        } else if (errno == EINTR) {
            continue;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
            c.error = std::string("recv: ") + std::strerror(errno);
            return;
        }
        break;
    }
    parse_outcome out = parse_response(c.in, eof);
    if (out.status == parse_status::complete) {
        c.response = std::move(out.response);
    } else if (out.status == parse_status::malformed) {
        c.error = "malformed response: " + out.error;
    } else if (eof) {
        c.error = "closed by the server without a response; got \"" + printable(c.in) + "\"";
    }
}

bool multi_client::drive(phase ph, std::chrono::milliseconds timeout) {
    const auto deadline = test_clock::now() + timeout;
    std::vector<pollfd> fds;
    std::vector<std::size_t> which;
    while (true) {
        fds.clear();
        which.clear();
        for (std::size_t i = 0; i < conns_.size(); ++i) {
            conn& c = conns_[i];
            if (!c.error.empty()) {
                return false;
            }
            const bool pending =
                ph == phase::sending ? (!c.connected || c.out_off < c.out.size()) : !c.response;
            if (pending) {
                const short events = c.want != 0 ? c.want : ph == phase::sending ? POLLOUT : POLLIN;
                fds.push_back({c.fd, events, 0});
                which.push_back(i);
            }
        }
        if (fds.empty()) {
            return true;
        }
        const int rc = ::poll(fds.data(), fds.size(), remaining_ms(deadline));
        if (rc == 0) {
            conns_[which.front()].error = std::string("timed out ") +
                                          (ph == phase::sending ? "sending" : "waiting for the response") +
                                          " (" + std::to_string(fds.size()) + " connections pending)";
            return false;
        }
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            conns_[which.front()].error = std::string("poll: ") + std::strerror(errno);
            return false;
        }
        for (std::size_t k = 0; k < fds.size(); ++k) {
            if (fds[k].revents == 0) {
                continue;
            }
            if (ph == phase::sending) {
                step_send(conns_[which[k]]);
            } else {
                step_read(conns_[which[k]]);
            }
        }
    }
}

bool multi_client::send_all(std::chrono::milliseconds timeout) {
    return drive(phase::sending, timeout);
}

bool multi_client::read_all(std::chrono::milliseconds timeout) {
    return drive(phase::reading, timeout);
}

std::size_t multi_client::responses_received() const noexcept {
    std::size_t n = 0;
    for (const auto& c : conns_) {
        if (c.response) {
            ++n;
        }
    }
    return n;
}

std::string multi_client::first_error() const {
    for (std::size_t i = 0; i < conns_.size(); ++i) {
        if (!conns_[i].error.empty()) {
            return "connection " + std::to_string(i) + ": " + conns_[i].error;
        }
    }
    return "";
}

} // namespace sluice::test
