// What every loop of one server shares: read-only after start, plus a few atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include <sluice/config.h>
#include <sluice/log.h>
#include <sluice/router.h>

namespace sluice::detail {

class worker_pool;
class access_log;
class tls_context;

struct server_context {
    server_context(const config& c, const router& r, const logger& l) : cfg(c), routes(r), log(l) {}

    const config& cfg;
    const router& routes;
    const logger& log;
    worker_pool* workers = nullptr; ///< set when dispatch = pool
    bool collect_metrics = false;   ///< admin.listen is set: loops count requests per route
    access_log* access = nullptr;   ///< access_log.path is set
    /// Set when tls.cert is: a listener speaks TLS (`listen`, or tls.listen's beside a plaintext one)
    const tls_context* tls = nullptr;
    /// Tests only: asked before each thread the runtimes and the worker pool start; true makes
    /// that start fail as std::thread does when the process is out of threads (thread_start.h).
    std::function<bool()> refuse_thread;

    /// Connections open across every loop (limits.max_connections).
    std::atomic<std::uint32_t> open_connections{0};
    /// Set by the thread-per-connection runtime while more than 75% of its threads hold or are
    /// about to hold a connection: responses then close their connection (once the requests
    /// already pipelined are answered) so the waiting ones get a turn (Tomcat BIO).
    std::atomic<bool> keepalive_pressure{false};
    /// Set by the thread-per-connection runtime while a connection waits with no thread for it
    /// (more connections than threads): a lingering close would hold a thread it needs.
    std::atomic<bool> threads_short{false};
    /// Set when a stop begins with shutdown_delay_ms: the listeners close when the delay ends,
    /// so each response meanwhile closes its connection (after the requests already pipelined),
    /// and a balancer's pooled connections end cleanly rather than when the drain closes them.
    std::atomic<bool> closing_soon{false};
    /// Set before the runtime stops after a hand-over (handover.h): the listening sockets live
    /// on in the new process, so an idle keep-alive connection is not closed at once (a request
    /// the client sends meanwhile would meet a reset) but answered once more, with
    /// Connection: close; those that stay idle close when the drain ends (shutdown_timeout_ms).
    std::atomic<bool> drain_idle_after_response{false};
};

} // namespace sluice::detail
