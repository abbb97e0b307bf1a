// What a server keeps for operating it: the readiness phase, the watched limiters and
// clients, the access log and the admin listener, and the /metrics snapshot over them.
//
//   phase:  starting --start() done--> serving --stop() begun--> draining
//
// The admin listener starts before the server's own listeners (so a probe sees "starting",
// not a refused connection) and stops after the drain (so it sees "draining" throughout).
// It touches the runtime only once the phase is serving, which orders its reads after
// runtime::start() (release/acquire on the phase).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sluice/client.h>
#include <sluice/config.h>
#include <sluice/limiter.h>
#include <sluice/log.h>
#include <sluice/router.h>

#include "metrics/snapshot.h"

namespace sluice::detail {

class access_log;
class admin_endpoint;
class runtime;
class limiter_core;

class server_operations {
public:
    enum class phase { starting, serving, draining };

    server_operations();
    ~server_operations();
    server_operations(const server_operations&) = delete;
    server_operations& operator=(const server_operations&) = delete;

    void watch(std::string_view name, const limiter& lim);
    void watch(std::string_view name, std::function<client_stats()> stats);

    /// In server::start(), before the runtime starts: opens the access log (for `loops`
    /// loops) and starts the admin listener, each if configured, the latter on `admin_fds`
    /// (inherited, checked, owned from here on) when there are any. Throws startup_error.
    void start(const config& cfg, const router& routes, std::size_t loops, const logger& log,
               std::vector<int> admin_fds = {});
    /// The runtime serves: readiness may go true, /metrics reads it.
    void serving(const runtime* rt) noexcept;
    /// stop() begun: readiness false at once.
    void draining() noexcept { phase_.store(phase::draining, std::memory_order_release); }
    /// After the drain: stops the admin listener, then writes out and closes the access log.
    void stop() noexcept;
    /// A hand-over: the admin listener's socket serves in the new process; this one stops
    /// accepting on it at once and finishes its probes in progress.
    void stop_admin_after_handover() noexcept;
    /// The admin listener's listening sockets (for a hand-over); empty when it is off.
    std::vector<int> admin_listening_fds() const;

    access_log* log_sink() const noexcept { return access_.get(); }
    std::atomic<std::uint64_t>& watchdog_events() noexcept { return watchdog_events_; }
    void reopen_logs() noexcept;
    std::string not_ready() const;
    std::uint16_t admin_port() const noexcept;
    metrics_snapshot snapshot() const;

private:
    struct watched_limiter {
        std::string name;
        std::shared_ptr<limiter_core> core;
    };
    struct watched_client {
        std::string name;
        std::function<client_stats()> stats;
    };

    std::atomic<phase> phase_{phase::starting};
    std::atomic<const runtime*> runtime_{nullptr};
    std::atomic<std::uint64_t> watchdog_events_{0};
    std::vector<watched_limiter> limiters_;
    std::vector<watched_client> clients_;
    std::vector<std::string> routes_;
    std::unique_ptr<access_log> access_;
    std::unique_ptr<admin_endpoint> admin_;
};

} // namespace sluice::detail
