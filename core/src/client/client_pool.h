// The keep-alive pool of one client on one loop, for one upstream.
//
// Connections: at most max_connections open or opening; idle ones reused most recently used
// first (the warmest socket, and the cold ones age out through idle_timeout). Calls beyond
// that wait FIFO, at most max_pending of them, each at most acquire_timeout. Everything runs
// on the loop's thread; the pool is shut down (every call cancelled, every connection closed)
// when the loop stops or the client is destroyed.
//
// Figures (client_stats): the pool's idle connections and its pending calls (waiters plus
// connections opening, each for one call) are tallied here on the loop and published to the
// client's shared counters as differences, so stats() sums every loop without a lock.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <vector>

#include <sluice/client.h>

#include "client/client_call.h"
#include "client/upstream.h"
#include "loop/loop.h"

namespace sluice::detail {

class client_connection;
class client_tls_context;

struct pool_config {
    client_options options;
    std::shared_ptr<upstream_state> upstream;
    std::shared_ptr<client_counters> counters;
    /// For https addresses; null when the upstream has none. Held by every connection (through
    /// its pool) until its op::close: the loop's TLS decorator calls into it until then.
    std::shared_ptr<client_tls_context> tls;
};

class client_pool : public std::enable_shared_from_this<client_pool> {
public:
    client_pool(detail::loop& l, pool_config cfg) noexcept : loop_(l), cfg_(std::move(cfg)) {}
    /// Takes back from the shared gauges what this pool still adds to them.
    ~client_pool();
    client_pool(const client_pool&) = delete;
    client_pool& operator=(const client_pool&) = delete;

    /// Registers the loop's on_drained hook (shutdown once the server's connections are gone);
    /// once, right after construction, on the loop thread.
    void attach();
    /// A new call (the loop thread).
    void submit(std::shared_ptr<client_call_state> call) noexcept;
    /// cancel() of a handle (the loop thread).
    void cancel(const std::shared_ptr<client_call_state>& call) noexcept;
    /// Cancels every call, closes every connection, refuses new calls.
    void shutdown() noexcept;
    /// Any thread (the client prunes the pools of loops that ended).
    bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

    // For connections.
    detail::loop& owner_loop() noexcept { return loop_; }
    const pool_config& config() const noexcept { return cfg_; }
    const upstream_host& host(std::size_t i) const noexcept { return cfg_.upstream->hosts()[i]; }
    /// A connection served its call and may be reused.
    void put_idle(client_connection* c) noexcept;
    /// A connection closes: it no longer counts; waiters may get a new one.
    void forget(client_connection* c) noexcept;
    /// A connection starts opening for a call / stops (connected, failed, closed): the call
    /// is pending meanwhile.
    void connect_began() noexcept;
    void connect_ended() noexcept;
    /// Connection c, opening for `call` (may be null), failed (refused / timed out): the pool
    /// closes c (which may free it at once) and tries another address for the call in c's
    /// place in max_connections, or fails it.
    void connect_failed(client_connection* c, const std::shared_ptr<upstream_address>& address,
                        std::shared_ptr<client_call_state> call, client_errc why) noexcept;
    /// Makes the Host of `call`'s head name upstream entry `entry`, the one its connection goes
    /// to, unless the request brought its own Host. False when out of memory.
    bool aim_head(client_call_state& call, std::size_t entry) noexcept;
    /// The stale keep-alive case: `call` runs again, once, on a fresh connection.
    void retry(std::shared_ptr<client_call_state> call) noexcept;
    /// Ends a call: counts it and hands its outcome over.
    void deliver(const std::shared_ptr<client_call_state>& call, result<client_response> r) noexcept;

private:
    void acquire(std::shared_ptr<client_call_state> call) noexcept;
    void open_new(std::shared_ptr<client_call_state> call) noexcept;
    void open_on(std::shared_ptr<client_call_state> call, std::shared_ptr<upstream_address> a) noexcept;
    void serve_waiters() noexcept;
    void remove_waiter(client_call_state* call) noexcept;
    /// The address `call` connects to next: round robin (the call's own turn, taken at its first
    /// connect), the first from there not marked failed and not tried by the call; null if none.
    std::shared_ptr<upstream_address> pick_address(client_call_state& call) noexcept;
    /// The upstream's current address set: reloaded when a refresh published a new one (one
    /// atomic load otherwise). Indexes go into this snapshot only, never into a shared vector.
    const address_set& addresses() noexcept;
    static void on_acquire_timeout(timer& t) noexcept;
    /// Adds what idle_ and the pending calls changed since the last call to the shared gauges.
    void publish_gauges() noexcept;

    detail::loop& loop_;
    pool_config cfg_;
    std::vector<client_connection*> idle_; // most recently used at the back
    std::vector<client_connection*> all_;  // open or opening (for shutdown)
    std::deque<std::shared_ptr<client_call_state>> waiters_;
    std::shared_ptr<const address_set> set_;           // loaded by addresses()
    std::uint64_t set_generation_ = ~std::uint64_t{0}; // none loaded yet
    std::atomic<bool> stopped_{false};                 // written on the loop, read by any thread
    std::size_t connecting_ = 0;                       // connections opening, each for one call
    std::int64_t published_idle_ = 0;                  // what this pool has added to counters->idle
    std::int64_t published_pending_ = 0;
};

} // namespace sluice::detail
