// sluice-connhold: opens N TCP connections to one address, optionally sends one request on each,
// holds them, and reports what happened as one JSON line on stdout.
//
// It exists for the measurements wrk cannot make: memory per idle or suspended connection, and
// many requests in flight at once. Phases, each bounded by --deadline-ms:
//
//   open    connect() in a window of --window pending connects (the listen backlog is finite:
//           a SYN that finds the accept queue full is dropped and retried after 1 s)
//   wait    until every connection is connected / has sent its request / has its answer
//           (--wait connected|sent|answered), or --wait-timeout-ms
//   ready   one line {"event":"ready",...} on stderr: the caller measures the server now
//   hold    --hold-ms, or until a line (or EOF) on stdin with --hold-stdin, or SIGINT/SIGTERM/
//           SIGUSR1; answers that arrive meanwhile are still counted
//   report  close everything, print the JSON line on stdout
//
// Latency is measured from the first byte of the request written to the last byte of the answer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "options.h"

namespace {

using connhold::options;
using connhold::wait_for;
using steady = std::chrono::steady_clock;

enum class conn_state { unused, connecting, sending, awaiting, answered, closed };

struct connection {
    int fd = -1;
    conn_state state = conn_state::unused;
    steady::time_point started{};
    steady::time_point sent_at{};
    std::size_t written = 0;
    std::string head;
    bool head_done = false;
    int status = 0;
    std::optional<std::size_t> body_left;
    bool chunked = false;
    std::string chunk_tail;
};

struct error_counts {
    std::size_t connect = 0;
    std::size_t connect_timeout = 0;
    std::size_t write = 0;
    std::size_t read = 0;
    std::size_t closed_before_answer = 0;
    std::size_t closed_idle = 0;
    std::size_t protocol = 0;

    std::size_t total() const {
        return connect + connect_timeout + write + read + closed_before_answer + closed_idle + protocol;
    }
};

struct counters {
    std::size_t attempted = 0;
    std::size_t connected = 0;
    std::size_t sent = 0;
    std::size_t answered = 0;
    std::size_t status_2xx = 0;
    std::size_t status_other = 0;
    std::size_t open = 0;
    error_counts errors;
    std::vector<double> connect_ms;
    std::vector<double> latency_ms;
};

double ms_between(steady::time_point a, steady::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) {
        return 0.0;
    }
    std::sort(v.begin(), v.end());
    auto rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(rank, v.size() - 1)];
}

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

class holder {
public:
    explicit holder(options o) : opt_(std::move(o)), conns_(opt_.connections) {
        start_ = steady::now();
        deadline_ = start_ + std::chrono::milliseconds(opt_.deadline_ms);
        ep_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep_ < 0) {
            throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
        }
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGUSR1);
        ::sigprocmask(SIG_BLOCK, &set, nullptr);
        sfd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        watch(sfd_, EPOLLIN, signal_tag);
        if (opt_.hold_stdin) {
            watch(STDIN_FILENO, EPOLLIN, stdin_tag);
        }
        ::inet_pton(AF_INET, opt_.host.c_str(), &addr_.sin_addr);
        addr_.sin_family = AF_INET;
        addr_.sin_port = htons(static_cast<std::uint16_t>(opt_.port));
    }

    holder(const holder&) = delete;
    holder& operator=(const holder&) = delete;

    ~holder() {
        for (auto& c : conns_) {
            close_conn(c);
        }
        ::close(sfd_);
        ::close(ep_);
    }

    void run() {
        open_phase();
        wait_phase();
        report_ready();
        hold_phase();
        held_ms_ = ms_between(ready_at_, steady::now());
        open_at_end_ = stats_.open;
    }

    void print_report() {
        const auto& e = stats_.errors;
        fmt::print(
            "{{\"tool\":\"sluice-connhold\",\"target\":\"{}:{}\",\"connections\":{},\"request\":{},"
            "\"attempted\":{},\"connected\":{},\"sent\":{},\"answered\":{},\"status_2xx\":{},"
            "\"status_other\":{},\"open_at_ready\":{},\"open_at_end\":{},\"ready\":{},\"interrupted\":{},"
            "\"errors\":{{\"total\":{},\"connect\":{},\"connect_timeout\":{},\"write\":{},\"read\":{},"
            "\"closed_before_answer\":{},\"closed_idle\":{},\"protocol\":{}}},"
            "\"open_ms\":{:.1f},\"ready_ms\":{:.1f},\"held_ms\":{:.1f},"
            "\"connect_ms\":{{\"p50\":{:.3f},\"p99\":{:.3f},\"max\":{:.3f}}},"
            "\"latency_ms\":{{\"p50\":{:.3f},\"p90\":{:.3f},\"p99\":{:.3f},\"max\":{:.3f}}}}}\n",
            opt_.host, opt_.port, opt_.connections, opt_.request.empty() ? "false" : "true", stats_.attempted,
            stats_.connected, stats_.sent, stats_.answered, stats_.status_2xx, stats_.status_other,
            open_at_ready_, open_at_end_, ready_ ? "true" : "false", interrupted_ ? "true" : "false",
            e.total(), e.connect, e.connect_timeout, e.write, e.read, e.closed_before_answer, e.closed_idle,
            e.protocol, open_ms_, ms_between(start_, ready_at_), held_ms_, percentile(stats_.connect_ms, 50),
            percentile(stats_.connect_ms, 99), percentile(stats_.connect_ms, 100),
            percentile(stats_.latency_ms, 50), percentile(stats_.latency_ms, 90),
            percentile(stats_.latency_ms, 99), percentile(stats_.latency_ms, 100));
        std::fflush(stdout);
    }

private:
    static constexpr std::uint64_t signal_tag = ~std::uint64_t{0};
    static constexpr std::uint64_t stdin_tag = ~std::uint64_t{0} - 1;

    void watch(int fd, std::uint32_t events, std::uint64_t tag, int op = EPOLL_CTL_ADD) {
        epoll_event ev{};
        ev.events = events;
        ev.data.u64 = tag;
        if (::epoll_ctl(ep_, op, fd, &ev) != 0) {
            throw std::runtime_error(fmt::format("epoll_ctl: {}", std::strerror(errno)));
        }
    }

    bool past(steady::time_point t) const { return steady::now() >= t; }

    void open_phase() {
        std::size_t next = 0;
        while (!stop_ && !past(deadline_) && (next < conns_.size() || pending_connects_ > 0)) {
            while (next < conns_.size() && pending_connects_ < opt_.window) {
                start_connect(next++);
            }
            poll_once(deadline_);
            expire_connects();
        }
        open_ms_ = ms_between(start_, steady::now());
    }

    // Settled: nothing more to wait for on this connection (done, or failed). A scan, not counters,
    // so that a connection that was answered and then closed is not counted twice.
    bool wait_done() const {
        if (opt_.wait == wait_for::connected) {
            return true;
        }
        for (const auto& c : conns_) {
            bool settled = c.state == conn_state::closed || c.state == conn_state::answered ||
                           (opt_.wait == wait_for::sent && c.state == conn_state::awaiting);
            if (!settled) {
                return false;
            }
        }
        return true;
    }

    void wait_phase() {
        auto until = std::min(deadline_, steady::now() + std::chrono::milliseconds(opt_.wait_timeout_ms));
        while (!stop_ && !past(until) && !wait_done()) {
            poll_once(until);
        }
        ready_ = wait_done();
    }

    void report_ready() {
        ready_at_ = steady::now();
        open_at_ready_ = stats_.open;
        std::fprintf(stderr,
                     "{\"event\":\"ready\",\"ok\":%s,\"open\":%zu,\"connected\":%zu,\"sent\":%zu,"
                     "\"answered\":%zu,\"errors\":%zu,\"ms\":%.1f}\n",
                     ready_ ? "true" : "false", stats_.open, stats_.connected, stats_.sent, stats_.answered,
                     stats_.errors.total(), ms_between(start_, ready_at_));
        std::fflush(stderr);
    }

    void hold_phase() {
        auto until = deadline_;
        if (opt_.hold_ms > 0 || !opt_.hold_stdin) {
            until = std::min(deadline_, steady::now() + std::chrono::milliseconds(opt_.hold_ms));
        }
        while (!stop_ && !released_ && !past(until)) {
            poll_once(until);
        }
    }

    void poll_once(steady::time_point until) {
        std::array<epoll_event, 512> evs{};
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady::now()).count();
        int timeout = static_cast<int>(std::clamp<long long>(left, 0, 100));
        int n = ::epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), timeout);
        for (int i = 0; i < n; ++i) {
            const auto& ev = evs[static_cast<std::size_t>(i)];
            if (ev.data.u64 == signal_tag) {
                signalfd_siginfo si{};
                while (::read(sfd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
                    interrupted_ = true;
                }
                stop_ = true;
            } else if (ev.data.u64 == stdin_tag) {
                on_stdin();
            } else {
                on_event(conns_[ev.data.u64]);
            }
        }
    }

    // A line or EOF on stdin ends the hold (one that arrives earlier ends it as soon as it starts).
    void on_stdin() {
        std::array<char, 256> buf{};
        if (::read(STDIN_FILENO, buf.data(), buf.size()) <= 0) {
            ::epoll_ctl(ep_, EPOLL_CTL_DEL, STDIN_FILENO, nullptr);
        }
        released_ = true;
    }

    void start_connect(std::size_t i) {
        auto& c = conns_[i];
        ++stats_.attempted;
        c.started = steady::now();
        c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c.fd < 0) {
            ++stats_.errors.connect;
            c.state = conn_state::closed;
            return;
        }
        int one = 1;
        ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ++stats_.open;
        int r = ::connect(c.fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_);
        if (r != 0 && errno != EINPROGRESS) {
            fail(c, stats_.errors.connect);
            return;
        }
        c.state = conn_state::connecting;
        ++pending_connects_;
        watch(c.fd, EPOLLOUT, i);
    }

    void expire_connects() {
        if (opt_.connect_timeout_ms <= 0) {
            return;
        }
        auto limit = steady::now() - std::chrono::milliseconds(opt_.connect_timeout_ms);
        for (auto& c : conns_) {
            if (c.state == conn_state::connecting && c.started < limit) {
                --pending_connects_;
                fail(c, stats_.errors.connect_timeout);
            }
        }
    }

    void on_event(connection& c) {
        switch (c.state) {
        case conn_state::connecting:
            on_connected(c);
            break;
        case conn_state::sending:
            send_request(c);
            break;
        case conn_state::awaiting:
        case conn_state::answered:
            on_readable(c);
            break;
        case conn_state::unused:
        case conn_state::closed:
            break;
        }
    }

    void on_connected(connection& c) {
        --pending_connects_;
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            fail(c, stats_.errors.connect);
            return;
        }
        ++stats_.connected;
        stats_.connect_ms.push_back(ms_between(c.started, steady::now()));
        auto idx = static_cast<std::uint64_t>(&c - conns_.data());
        if (opt_.request.empty()) {
            // Idle: only a close by the server (or stray bytes) can wake us.
            c.state = conn_state::answered;
            watch(c.fd, EPOLLIN | EPOLLRDHUP, idx, EPOLL_CTL_MOD);
            return;
        }
        c.state = conn_state::sending;
        c.sent_at = steady::now();
        watch(c.fd, EPOLLOUT, idx, EPOLL_CTL_MOD);
        send_request(c);
    }

    void send_request(connection& c) {
        while (c.written < opt_.request.size()) {
            ssize_t w =
                ::send(c.fd, opt_.request.data() + c.written, opt_.request.size() - c.written, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                return;
            }
            if (w < 0) {
                fail(c, stats_.errors.write);
                return;
            }
            c.written += static_cast<std::size_t>(w);
        }
        ++stats_.sent;
        c.state = conn_state::awaiting;
        watch(c.fd, EPOLLIN | EPOLLRDHUP, static_cast<std::uint64_t>(&c - conns_.data()), EPOLL_CTL_MOD);
    }

    void on_readable(connection& c) {
        while (c.fd >= 0) {
            ssize_t r = ::recv(c.fd, buf_.data(), buf_.size(), 0);
            if (r > 0) {
                if (c.state == conn_state::answered) {
                    ++stats_.errors.protocol; // bytes nobody asked for
                    continue;
                }
                consume(c, std::string_view(buf_.data(), static_cast<std::size_t>(r)));
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
                return;
            }
            on_closed(c, r < 0);
            return;
        }
    }

    void on_closed(connection& c, bool reset) {
        if (c.state == conn_state::awaiting && c.head_done && !c.body_left && !c.chunked) {
            finish(c); // a body delimited by the close
            close_conn(c);
            return;
        }
        if (c.state == conn_state::awaiting) {
            fail(c, reset ? stats_.errors.read : stats_.errors.closed_before_answer);
            return;
        }
        fail(c, stats_.errors.closed_idle);
    }

    void consume(connection& c, std::string_view data) {
        if (!c.head_done) {
            c.head.append(data);
            auto end = c.head.find("\r\n\r\n");
            if (end == std::string::npos) {
                if (c.head.size() > 65536) {
                    fail(c, stats_.errors.protocol);
                }
                return;
            }
            parse_head(c, std::string_view(c.head).substr(0, end + 2));
            data = std::string_view(c.head).substr(end + 4);
        }
        if (c.body_left) {
            auto take = std::min(*c.body_left, data.size());
            *c.body_left -= take;
            if (take < data.size()) {
                ++stats_.errors.protocol;
            }
            if (*c.body_left == 0) {
                finish(c);
            }
        } else if (c.chunked) {
            c.chunk_tail.append(data);
            if (c.chunk_tail.size() > 16) {
                c.chunk_tail.erase(0, c.chunk_tail.size() - 16);
            }
            if (c.chunk_tail.ends_with("0\r\n\r\n")) {
                finish(c);
            }
        }
        if (c.state == conn_state::answered) {
            c.head.clear();
            c.head.shrink_to_fit();
        }
    }

    void parse_head(connection& c, std::string_view head) {
        c.head_done = true;
        if (head.size() > 12 && head.substr(0, 5) == "HTTP/") {
            c.status = std::atoi(std::string(head.substr(9, 3)).c_str());
        }
        std::size_t pos = head.find("\r\n");
        while (pos != std::string_view::npos && pos + 2 < head.size()) {
            auto next = head.find("\r\n", pos + 2);
            auto line = head.substr(pos + 2, next - pos - 2);
            auto colon = line.find(':');
            if (colon != std::string_view::npos) {
                auto name = lower(line.substr(0, colon));
                auto value = line.substr(colon + 1);
                while (!value.empty() && value.front() == ' ') {
                    value.remove_prefix(1);
                }
                if (name == "content-length") {
                    c.body_left =
                        static_cast<std::size_t>(std::strtoull(std::string(value).c_str(), nullptr, 10));
                } else if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) {
                    c.chunked = true;
                }
            }
            pos = next;
        }
        if (c.status == 204 || c.status == 304) {
            c.body_left = 0;
        }
    }

    void finish(connection& c) {
        ++stats_.answered;
        stats_.latency_ms.push_back(ms_between(c.sent_at, steady::now()));
        ++(c.status >= 200 && c.status < 300 ? stats_.status_2xx : stats_.status_other);
        c.state = conn_state::answered;
    }

    void fail(connection& c, std::size_t& counter) {
        ++counter;
        close_conn(c);
    }

    void close_conn(connection& c) {
        if (c.fd >= 0) {
            if (opt_.close_rst) {
                linger l{1, 0};
                ::setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
            }
            ::close(c.fd);
            c.fd = -1;
            --stats_.open;
        }
        c.state = conn_state::closed;
    }

    options opt_;
    std::vector<connection> conns_;
    counters stats_;
    std::array<char, 65536> buf_{};
    sockaddr_in addr_{};
    int ep_ = -1;
    int sfd_ = -1;
    std::size_t pending_connects_ = 0;
    bool stop_ = false;
    bool released_ = false;
    bool ready_ = false;
    bool interrupted_ = false;
    std::size_t open_at_ready_ = 0;
    std::size_t open_at_end_ = 0;
    double open_ms_ = 0;
    double held_ms_ = 0;
    steady::time_point start_{};
    steady::time_point deadline_{};
    steady::time_point ready_at_{};
};

} // namespace

int main(int argc, char** argv) {
    try {
        auto opt = connhold::parse_options(argc, argv);
        connhold::raise_fd_limit(opt.connections);
        holder h(std::move(opt));
        h.run();
        h.print_report();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sluice-connhold: %s\n", e.what());
        return 1;
    }
    return 0;
}
