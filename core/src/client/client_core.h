// The shared state behind sluice::client: options, the upstream, the pools of every loop the
// client has run on, and the client's own reactor loop (started on first need).
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <thread>
#include <vector>

#include <sluice/client.h>
#include <sluice/log.h>

#include "client/client_call.h"
#include "client/client_pool.h"
#include "client/upstream_refresher.h"
#include "loop/loop.h"

namespace sluice::detail {

class client_tls_context;

/// The user's client_options::log behind a gate that ~client closes: the loops, the TLS
/// context and the resolver thread log through it, and no line reaches the sink once close()
/// has returned (a line being written is waited for). Shared by every copy of the logger, so a
/// TLS handshake that fails on a server loop after ~client (the pool's shutdown is posted
/// behind it) finds the gate closed instead of a sink whose captures the user has freed.
class log_gate {
public:
    explicit log_gate(logger::sink s) noexcept : sink_(std::move(s)) {}
    /// Any thread, several at once.
    void write(log_level l, std::string_view message) const;
    /// Waits for lines being written, then drops the sink (destroyed here, on this thread).
    void close() noexcept;

private:
    mutable std::shared_mutex mu_;
    logger::sink sink_; // under mu_; empty once closed
};

class client_core : public std::enable_shared_from_this<client_core> {
public:
    client_core(upstream u, client_options o);
    ~client_core();
    client_core(const client_core&) = delete;
    client_core& operator=(const client_core&) = delete;

    /// Starts `call` on `port`'s loop (a reactor). Thread-safe. False when that loop has
    /// stopped: the call was not started and its deliver function was not run.
    bool start(const std::shared_ptr<loop_port>& port, std::shared_ptr<client_call_state> call);
    /// The client's own loop, started on first use; null when no reactor backend runs here
    /// (or the client is shutting down).
    std::shared_ptr<loop_port> own_port();
    /// Cancels every call of every loop, closes every connection, stops the own loop and the
    /// resolver thread (at most upstream_refresher::stop_wait for a lookup in progress).
    void shutdown() noexcept;

    const client_options options;
    const upstream target;
    const std::shared_ptr<client_counters> counters = std::make_shared<client_counters>();
    /// Null unless an address is https.
    std::shared_ptr<client_tls_context> tls() const noexcept { return tls_; }

private:
    std::shared_ptr<client_pool> pool_for(const std::shared_ptr<loop_port>& port);
    void run_own_loop(std::promise<std::shared_ptr<loop_port>>& ready) noexcept;

    std::mutex mu_;
    std::vector<std::pair<std::shared_ptr<loop_port>, std::shared_ptr<client_pool>>> pools_;
    std::thread own_thread_;
    std::shared_ptr<loop_port> own_port_;
    bool own_failed_ = false;
    bool shut_ = false;
    std::shared_ptr<log_gate> gate_; // null when the log goes to stderr (no user sink)
    logger log_;
    std::shared_ptr<client_tls_context> tls_;
    upstream_refresher refresher_;
};

} // namespace sluice::detail
