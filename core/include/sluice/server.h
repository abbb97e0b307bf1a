// The server: routes, a backend chosen by configuration, and its threads.
//
//   sluice::server srv(cfg);
//   srv.route("GET", "/", [](sluice::exchange& ex) { ex.response().text("Hello"); });
//   srv.start();       // binds and starts threads, or throws startup_error
//   srv.wait();        // until stop() is called (from a signal handler thread, a handler, ...)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <sluice/config.h>
#include <sluice/coro.h>
#include <sluice/handler.h>
#include <sluice/log.h>

namespace sluice {

namespace detail {
class server_impl;
struct server_access; // the core's own uses (the admin listener's hand-over)
} // namespace detail

class limiter;
struct client_stats;

struct server_stats {
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_open = 0;
    /// Of those, connections whose last response is out and that read and drop what the client
    /// still sends before closing (limits.lingering_timeout_ms).
    std::uint64_t connections_lingering = 0;
    /// Connections closed at once: limits.max_connections reached, or (blocking) every thread busy
    /// and the accept queue full.
    std::uint64_t connections_refused = 0;
    std::uint64_t requests = 0;       ///< requests whose handler ran (or that got an error response)
    std::uint64_t exchanges_live = 0; ///< exchanges not yet freed (suspended ones included)
    std::uint64_t exchanges_suspended = 0;
    std::uint64_t async_timeouts = 0; ///< async exchanges whose timeout fired
    std::uint64_t async_errors = 0;   ///< async exchanges that got on_error
    /// The most response bytes one connection has had queued in the server at once (sent to
    /// the kernel not yet), since start: how far a slow reader let output pile up.
    std::uint64_t output_queued_peak = 0;
};

class server {
public:
    explicit server(config cfg);
    server(config cfg, logger log);
    ~server(); ///< stops the server if it runs
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// Adds a route (see router.h). Routes are fixed once start() has been called.
    server& route(std::string_view method, std::string_view pattern, handler h);
    server& get(std::string_view pattern, handler h) { return route("GET", pattern, std::move(h)); }
    server& post(std::string_view pattern, handler h) { return route("POST", pattern, std::move(h)); }
    /// The same for a coroutine handler, f(ex) returning sluice::task<> (coro.h).
    template <coroutine_function F>
    server& route(std::string_view method, std::string_view pattern, F f) {
        return route(method, pattern, coroutine_handler(std::move(f)));
    }
    template <coroutine_function F>
    server& get(std::string_view pattern, F f) {
        return route("GET", pattern, coroutine_handler(std::move(f)));
    }
    template <coroutine_function F>
    server& post(std::string_view pattern, F f) {
        return route("POST", pattern, coroutine_handler(std::move(f)));
    }

    /// Shows a limiter on /metrics (label limiter="name": permits, in use, queued, granted,
    /// rejected, timed out) and makes /readyz say not ready while it is saturated (every permit
    /// in use and its queue full: a load balancer should send the next request elsewhere).
    /// Before start(). The server keeps the limiter's state alive.
    server& watch(std::string_view name, const limiter& lim);
    /// Shows an upstream client on /metrics (label upstream="name"). `stats` (usually
    /// [&c] { return c.stats(); }) is called on each scrape, on the admin thread, until stop()
    /// returns: what it uses must live that long. Before start().
    server& watch(std::string_view name, std::function<client_stats()> stats);

    /// Validates the configuration against the registered backends, binds, starts the threads.
    /// Throws startup_error naming the key at fault (unknown backend, address in use, ...).
    void start();
    /// Stops accepting, ends suspended exchanges (on_error with shutting_down), closes every
    /// connection and joins the threads; with shutdown_delay_ms, readiness goes false first and
    /// the listeners close only after the delay (a second stop() ends it at once). Thread-safe
    /// and idempotent. From any other thread it
    /// returns once the server has stopped (also when another thread began the stop). From one
    /// of the server's own threads (a handler, an async listener, an executor task, a pool
    /// worker) it only begins the stop, or does nothing if a stop is in progress, and returns
    /// at once: that thread must return to its loop for the stop to finish. wait() sees the end.
    void stop() noexcept;
    /// Blocks until the server has stopped.
    void wait();
    /// start() then wait() until SIGINT or SIGTERM, then stop() (readiness goes false first, then
    /// the listeners close and the drain runs; with shutdown_delay_ms they close after the delay,
    /// or at a second SIGINT or SIGTERM). SIGUSR1 meanwhile reopens the access log; SIGHUP
    /// reloads the TLS certificates (reload_tls()).
    void run_until_signal();
    /// Makes the access log open its path again (after logrotate moved it); thread-safe.
    void reopen_logs() noexcept;
    /// Reads the TLS files again (tls.cert, tls.key, every [[tls.sni]] entry's, tls.client_ca)
    /// and uses them for every handshake that starts afterwards; connections already open keep
    /// theirs. A bad file is logged (naming the key and why) and the current certificates stay.
    /// Returns whether the new ones took effect; false too when the server does not speak TLS
    /// or has not started. Thread-safe.
    bool reload_tls() noexcept;
    /// What /readyz says: started, not stopping, and no watched limiter saturated.
    bool ready() const noexcept;
    /// The admin listener's bound port (admin.listen), 0 when it is off.
    std::uint16_t admin_port() const noexcept;

    /// The bound port of `listen` (useful with "listen = 127.0.0.1:0"): plaintext when
    /// tls.listen is set, else TLS when tls.cert is set.
    std::uint16_t port() const noexcept;
    /// The bound port of tls.listen, the TLS listener beside the plaintext one; 0 when tls.listen
    /// is unset (then port() is the only listener, TLS or not).
    std::uint16_t tls_port() const noexcept;
    /// The backend in use ("epoll"), after start().
    std::string_view backend_name() const noexcept;
    const config& settings() const noexcept;
    const sluice::logger& logger() const noexcept;
    server_stats stats() const noexcept;

private:
    friend struct detail::server_access;
    std::unique_ptr<detail::server_impl> impl_;
};

} // namespace sluice
