// Per-loop state of the HTTP server: the connections, pools of exchanges and
// buffers (so steady-state requests allocate nothing and idle connections hold
// no buffers), the Date cache, and the loop's counters.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/exchange.h>
#include <sluice/handler.h>
#include <sluice/router.h>
#include <sluice/server.h>

#include "access_log/access_queue.h"
#include "http/server_session.h"
#include "loop/loop.h"
#include "metrics/request_metrics.h"
#include "server/server_context.h"

namespace sluice::detail {

class connection;
class tls_driver;

/// What a connection needs only while a request is in progress: the parser and the
/// exchange. Pooled per loop, so an idle keep-alive connection holds neither.
struct request_slot {
    explicit request_slot(const http::session_limits& limits) : session(limits) {}
    http::server_session session;
    sluice::exchange ex;
    const sluice::handler* handler = nullptr;
    /// For the metrics and the access log: when the request's first byte was read (the loop's
    /// clock), and the index of its route (router::size() = none matched).
    clock::time_point started{};
    std::size_t route = 0;
};

/// An I/O buffer lent by the loop's pool: one pointer in the connection that holds it.
using buffer = std::unique_ptr<std::string>;

/// Counters one loop writes and anyone may read (relaxed; summed by server::stats()).
struct loop_counters {
    std::atomic<std::uint64_t> accepted{0};
    std::atomic<std::uint64_t> open{0};
    std::atomic<std::uint64_t> lingering{0};
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> exchanges_live{0};
    std::atomic<std::uint64_t> suspended{0};
    std::atomic<std::uint64_t> output_queued_peak{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> async_timeouts{0};
    std::atomic<std::uint64_t> async_errors{0};

    /// Adds these counters to a server-wide sum.
    void add_to(server_stats& st) const noexcept {
        st.connections_accepted += accepted.load(std::memory_order_relaxed);
        st.connections_open += open.load(std::memory_order_relaxed);
        st.connections_lingering += lingering.load(std::memory_order_relaxed);
        st.requests += requests.load(std::memory_order_relaxed);
        st.exchanges_live += exchanges_live.load(std::memory_order_relaxed);
        st.exchanges_suspended += suspended.load(std::memory_order_relaxed);
        st.connections_refused += refused.load(std::memory_order_relaxed);
        st.async_timeouts += async_timeouts.load(std::memory_order_relaxed);
        st.async_errors += async_errors.load(std::memory_order_relaxed);
        st.output_queued_peak =
            std::max(st.output_queued_peak, output_queued_peak.load(std::memory_order_relaxed));
    }

    /// Raises a high-water mark (loop thread only, like add).
    static void raise(std::atomic<std::uint64_t>& c, std::uint64_t v) noexcept {
        if (v > c.load(std::memory_order_relaxed)) {
            c.store(v, std::memory_order_relaxed);
        }
    }

    /// Only the loop's thread writes: a plain load and store, no locked instruction.
    static void add(std::atomic<std::uint64_t>& c, std::int64_t d) noexcept {
        c.store(c.load(std::memory_order_relaxed) + static_cast<std::uint64_t>(d), std::memory_order_relaxed);
    }
};

class loop_context {
public:
    loop_context(detail::loop& l, server_context& s);
    ~loop_context();
    loop_context(const loop_context&) = delete;
    loop_context& operator=(const loop_context&) = delete;

    detail::loop& loop;
    server_context& server;
    loop_counters counters;
    http::date_cache dates;
    std::vector<router::param> params;        ///< scratch for route matching
    std::unique_ptr<request_metrics> metrics; ///< when the admin listener is on
    access_queue* access = nullptr;           ///< when the access log is on
    /// The loop's driver when a listener of the server speaks TLS (it wraps the backend's), else
    /// null. Only connections accepted on a TLS listener are adopted by it (listener_kind).
    tls_driver* tls = nullptr;

    /// Whether exchanges are recorded (metrics or access log): the request path reads the
    /// clock only then.
    bool records() const noexcept { return metrics != nullptr || access != nullptr; }
    /// An exchange ended with `status` (499: the client went away first, nginx's convention):
    /// counts it and queues its access log line. Loop thread only; never blocks.
    void record(request_slot& s, int status, std::size_t body_bytes) noexcept;

    std::unique_ptr<request_slot> take_slot();
    /// Takes a slot back after its exchange ended (on_complete has run): resets the exchange
    /// (detaching its async state) and the session, and pools it.
    void give_slot(std::unique_ptr<request_slot> s) noexcept;

    /// An empty buffer with some capacity; give it back when done (b becomes null).
    buffer take_buffer();
    void give_buffer(buffer& b) noexcept;

    /// Server stop on this loop: connections drain for limits' shutdown_timeout_ms, then what
    /// is left ends (503 for suspended exchanges), then, a second later, closes.
    void begin_shutdown();
    /// A second after the drain ended, and each second after while connections are left.
    void sweep_after_drain();
    bool shutting_down() const noexcept { return shutting_down_; }
    /// The drain's time is up (shutdown_timeout_ms): a connection accepted since lingers no more.
    bool drain_over() const noexcept { return drain_over_; }

    /// Connections of this loop (for shutdown).
    void add(connection* c);
    void remove(connection* c) noexcept;
    const std::vector<connection*>& connections() const noexcept { return connections_; }

    std::string_view date() { return dates.get(std::chrono::system_clock::now()); }

    /// Counts a connection refused at limits.max_connections; logs at most once a second, with
    /// the count, so an overload does not turn into a log flood.
    void note_refused() noexcept;

private:
    std::vector<std::unique_ptr<request_slot>> free_slots_;
    std::vector<buffer> free_buffers_;
    std::vector<connection*> connections_; // each knows its index (swap-remove)
    std::uint64_t refused_unlogged_ = 0;
    clock::time_point refused_logged_at_{};
    bool shutting_down_ = false;
    bool drain_over_ = false;
};

} // namespace sluice::detail
