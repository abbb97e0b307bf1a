// A sluice::server for tests: bound to 127.0.0.1:0 with a chosen backend and dispatch mode,
// small thread counts (the suite runs on two shared cores and under TSan), and a log sink
// the test can assert on.
//
//   test_server s("epoll", dispatch_mode::pool);
//   s.config().limits.header_timeout_ms = 200;
//   s.route("GET", "/", [](exchange& ex) { ex.response().text("hi"); });
//   s.start();
//   test_client c(s.port());
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/config.h>
#include <sluice/coro.h>
#include <sluice/handler.h>
#include <sluice/server.h>

#include "support/deadline.h"
#include "support/log_capture.h"

namespace sluice::test {

class test_server {
public:
    test_server(std::string backend, dispatch_mode dispatch);
    ~test_server();
    test_server(const test_server&) = delete;
    test_server& operator=(const test_server&) = delete;

    /// The configuration; changes take effect at start().
    sluice::config& config() noexcept { return cfg_; }
    /// Adds a route; before start().
    test_server& route(std::string_view method, std::string_view pattern, handler h);
    /// Adds a coroutine route (f(ex) returns sluice::task<>).
    template <coroutine_function F>
    test_server& route(std::string_view method, std::string_view pattern, F f) {
        return route(method, pattern, coroutine_handler(std::move(f)));
    }
    /// Runs fn on the server once it is built, before start() (server::watch, ...).
    test_server& before_start(std::function<void(sluice::server&)> fn) {
        before_start_.push_back(std::move(fn));
        return *this;
    }
    /// Builds the server, registers the routes and starts it (throws what server::start throws).
    void start();

    std::uint16_t port() const noexcept;
    server_stats stats() const noexcept;
    sluice::server& server() noexcept { return *server_; }
    bool running() const noexcept { return server_ != nullptr; }
    const log_capture& log() const noexcept { return *log_; }

    /// server::stop(); idempotent. Aborts the test program if it hangs past stop_deadline.
    void stop() noexcept;
    /// Stops and destroys the server (stale handles must survive this).
    void destroy() noexcept;

    /// Waits until no exchange is alive (every one freed).
    bool wait_exchanges_freed(std::chrono::milliseconds timeout = default_timeout) const;
    /// Waits until exactly n exchanges are suspended.
    bool wait_suspended(std::uint64_t n, std::chrono::milliseconds timeout = default_timeout) const;

    static constexpr std::chrono::milliseconds stop_deadline{15'000};

private:
    struct pending_route {
        std::string method;
        std::string pattern;
        handler h;
    };

    void forget_tls_port() noexcept;

    sluice::config cfg_;
    std::uint16_t tls_port_ = 0; ///< registered for test_client (support/tls_stream.h)
    std::shared_ptr<log_capture> log_ = std::make_shared<log_capture>();
    std::vector<pending_route> routes_;
    std::vector<std::function<void(sluice::server&)>> before_start_;
    std::unique_ptr<sluice::server> server_;
};

} // namespace sluice::test
