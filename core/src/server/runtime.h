// How a server's threads are arranged. Chosen from the backend's traits:
//  - reactor_runtime: io_threads loops, each with its own SO_REUSEPORT listener, serving
//    many connections each (epoll, io_uring);
//  - thread_runtime: one acceptor loop and a bounded pool of threads, each running a loop
//    over one connection at a time (blocking; Tomcat's BIO connector).
// Both run the same loop, connection and exchange code.
#pragma once

#include <memory>
#include <vector>

#include <sluice/backend.h>
#include <sluice/server.h>

#include "metrics/request_metrics.h"
#include "server/listen_plan.h"
#include "server/server_context.h"
#include "server/socket_util.h"

namespace sluice::detail {

class loop;

class runtime {
public:
    virtual ~runtime() = default;
    /// Creates the drivers on their threads and starts serving; throws startup_error. For each
    /// endpoint of the plan, accepts on its adopted sockets (inherited from systemd or handed
    /// over by the server this one replaces; owned by the runtime from here on, closed on
    /// failure) when there are any, or binds its address. A connection accepted on a TLS
    /// endpoint's socket goes through the loop's TLS driver; any other does not.
    virtual void start(listen_plan plan) = 0;
    /// The listening sockets with what each speaks, for a hand-over; valid until stop().
    virtual std::vector<listening_socket> listening_sockets() const = 0;
    /// Begins a graceful stop; thread-safe, idempotent.
    virtual void stop() noexcept = 0;
    /// Waits for every thread to end (after stop()).
    virtual void join() = 0;
    /// The bound port of endpoint `endpoint` of the plan (0: `listen`), 0 if there is none.
    virtual std::uint16_t port(std::size_t endpoint) const noexcept = 0;
    virtual server_stats stats() const noexcept = 0;
    /// Adds every loop's request figures (admin.listen set) to totals, sized routes + 1.
    virtual void collect(request_totals& totals) const noexcept = 0;
    /// Loops whose iterations the watchdog should time (reactor loops only).
    virtual std::vector<const loop*> watched_loops() const = 0;
};

std::unique_ptr<runtime> make_reactor_runtime(const io::backend& b, server_context& ctx);
std::unique_ptr<runtime> make_thread_runtime(const io::backend& b, server_context& ctx);

/// Driver options derived from the configuration.
io::driver_options driver_options_for(const server_context& ctx, unsigned loop_index);

} // namespace sluice::detail
