// A scripted upstream on 127.0.0.1 for client tests: each accepted connection runs the script
// on a thread of its own (blocking socket calls with deadlines), so a test decides byte by
// byte what the "backend" does: answer, stall, close a keep-alive connection, send garbage.
//
//   fake_upstream up([](upstream_conn& c) {
//       while (auto req = c.read_request()) { c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); }
//   });
//   sluice::client cl(sluice::upstream({up.address()}));
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/deadline.h"

struct ssl_ctx_st;
struct ssl_st;

namespace sluice::test {

/// One accepted connection, as the script sees it.
class upstream_conn {
public:
    explicit upstream_conn(int fd) noexcept : fd_(fd) {}
    /// The next request (head + Content-Length body), nullopt at EOF, error or timeout.
    std::optional<std::string> read_request(std::chrono::milliseconds timeout = default_timeout);
    bool write(std::string_view bytes);
    /// Waits at most `timeout` for bytes and returns what has arrived (bytes read_request()
    /// buffered first): raw bytes, for scripts that do not speak HTTP (a TLS relay). "" on a
    /// timeout or at the end of the stream.
    std::string read_some(std::chrono::milliseconds timeout = default_timeout);
    /// Waits until the peer closes (EOF or reset); false on timeout.
    bool wait_closed(std::chrono::milliseconds timeout = default_timeout);
    /// Closes with RST.
    void reset() noexcept;
    int fd() const noexcept { return fd_; }

private:
    int fd_;
    std::string in_;
};

/// The server side of TLS on a script's socket, for an https upstream: blocking OpenSSL with
/// the run's certificate (shared_test_certs()), every step bounded by a socket timeout.
///
///   fake_upstream up([](upstream_conn& c) {
///       upstream_tls t(c);
///       if (t.read_head()) { t.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody"); t.close_notify();
///       }
///   });
class upstream_tls {
public:
    /// Handshakes; ok() says whether it worked. `timeout` bounds each later step.
    explicit upstream_tls(upstream_conn& c, std::chrono::seconds timeout = std::chrono::seconds(5));
    ~upstream_tls();
    upstream_tls(const upstream_tls&) = delete;
    upstream_tls& operator=(const upstream_tls&) = delete;

    bool ok() const noexcept { return ssl_ != nullptr; }
    /// Reads up to the end of a request head (a GET); nullopt at EOF, error or timeout.
    std::optional<std::string> read_head();
    /// Reads what one TLS read gives, up to max bytes of plaintext; "" at EOF, error or timeout.
    std::string read_some(std::size_t max);
    bool write(std::string_view bytes);
    /// Ends the stream as a TLS peer should: close_notify, then FIN.
    void close_notify() noexcept;
    /// Ends it with a FIN alone (shutdown(2) on the socket, no close_notify): what anyone on the
    /// path can forge, and what a truncation attack looks like.
    void bare_fin() noexcept;

private:
    upstream_conn& conn_;
    ssl_ctx_st* ctx_ = nullptr;
    ssl_st* ssl_ = nullptr;
};

class fake_upstream {
public:
    using script = std::function<void(upstream_conn&)>;

    /// Listens on 127.0.0.1:0 with the given backlog.
    explicit fake_upstream(script s, int backlog = 128);
    ~fake_upstream();
    fake_upstream(const fake_upstream&) = delete;
    fake_upstream& operator=(const fake_upstream&) = delete;

    std::uint16_t port() const noexcept { return port_; }
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
    /// Connections accepted so far.
    int accepted() const noexcept { return accepted_.load(); }
    /// Connections whose script has returned and whose fd is closed.
    int closed() const noexcept { return closed_.load(); }
    /// Stops accepting (the listening socket stays open: new connects sit in the backlog).
    void pause_accepting() noexcept { paused_ = true; }

private:
    void accept_loop();

    script script_;
    int listen_fd_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<bool> paused_{false};
    std::atomic<int> accepted_{0};
    std::atomic<int> closed_{0};
    std::thread acceptor_;
    std::mutex mu_;
    std::vector<std::thread> conns_;
    std::vector<int> fds_;
};

/// "HTTP/1.1 <status> X\r\nContent-Length: n\r\n\r\n<body>"
std::string upstream_response(int status, std::string_view body, std::string_view extra_headers = {});

/// Answers every request on the connection with 200 "ok", until the peer closes.
void answer_all(upstream_conn& c);

/// Open file descriptors of this process (/proc/self/fd).
int open_fd_count();

} // namespace sluice::test
