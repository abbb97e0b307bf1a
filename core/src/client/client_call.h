// One client call: what the caller asked, where its outcome goes, and its place in a pool.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sluice/client.h>

#include "loop/loop_port.h"
#include "loop/timer_heap.h"

namespace sluice::detail {

class client_pool;
class client_connection;
struct upstream_address;

/// Atomics any thread reads (stats()); written on the loops with relaxed adds. The gauges are
/// signed: each loop adds its own changes, so the sum of a moment may dip below zero.
struct client_counters {
    std::atomic<std::uint64_t> connects{0};
    std::atomic<std::uint64_t> reused{0};
    std::atomic<std::uint64_t> retried{0};
    std::atomic<std::uint64_t> completed{0};
    std::atomic<std::uint64_t> failed{0};
    std::atomic<std::int64_t> open{0};
    std::atomic<std::int64_t> idle{0};    ///< every pool's idle_ (client_pool::publish_gauges)
    std::atomic<std::int64_t> pending{0}; ///< every pool's waiters and connects in progress
    /// failed by client_errc (value - 1).
    std::array<std::atomic<std::uint64_t>, client_errc_count> failed_by_kind{};
};

class client_call_state {
public:
    using deliver_fn = std::function<void(result<client_response>)>;

    client_call_state(client_request r, deliver_fn d) : request(std::move(r)), deliver(std::move(d)) {}

    // Set before the call is posted to its loop; constant afterwards, except that the pool
    // drops request.headers on the loop once the head is written (client_pool::submit).
    client_request request;
    /// Runs on the call's loop. A buffered call's posts the outcome to the caller's executor; a
    /// streamed call's runs the handler's on_end inline, after its on_head / on_body.
    deliver_fn deliver;
    /// A streamed call (send_streaming): the head and body go here as they arrive. Null: buffered.
    std::shared_ptr<client_stream_handler> stream;
    std::shared_ptr<loop_port> port; ///< the loop that runs the call

    std::atomic<bool> cancel_requested{false};
    std::atomic<bool> finished{false};
    /// What pause_body() / resume_body() asked for last; the connection applies it on the loop
    /// (reading the flag, not the order of posted requests, so the last word wins).
    std::atomic<bool> body_paused{false};

    // The call's loop thread only.
    std::string head;                  ///< the serialised request head (kept for a retry)
    client_response response;          ///< filled by the connection's session
    client_pool* pool = nullptr;       ///< while waiting for a connection
    client_connection* conn = nullptr; ///< while a connection serves it
    timer acquire_timer;               ///< armed while waiting
    bool waiting = false;
    bool retried = false;
    std::size_t connect_attempts = 0;
    /// The call's turn in the upstream's rotation, taken once, at its first connect: every
    /// address it tries is scanned from here (client_pool::pick_address), so calls of other
    /// loops that advance the shared rotation meanwhile cannot make this one skip an address.
    std::uint64_t ticket = 0;
    bool has_ticket = false;
    /// The addresses whose connect failed for this call: each is tried at most once per call.
    /// Held, not indexed: a refresh may replace the set between two attempts.
    std::vector<std::shared_ptr<upstream_address>> tried;
    /// Where `head` has the upstream's name as its Host value (head_host_at == npos: the
    /// request brought its own Host), and which upstream entry it names: a connection to
    /// another entry rewrites it (client_pool::aim_head).
    std::size_t head_host_at = std::string::npos;
    std::size_t head_host_len = 0;
    std::size_t head_host = 0;
    /// The head replaced by the last rewrite: a retry's old connection may still be sending it
    /// (its memory must stay untouched until that send completes, driver rule 7).
    std::string spare_head;
};

} // namespace sluice::detail
