// One server loop on a thread of its own: what both runtimes are made of.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sluice/backend.h>
#include <sluice/server.h>

#include "loop/loop.h"
#include "server/loop_context.h"

namespace sluice::detail {

struct loop_thread {
    std::unique_ptr<detail::loop> loop;
    std::unique_ptr<loop_context> ctx;
    std::thread thread;

    /// On the thread itself: creates the driver (io_uring's SINGLE_ISSUER ties a ring to the
    /// thread that creates it), the loop and its context, under `mu` (readers of loop and ctx
    /// take it too). Returns "" or why the driver could not be made.
    std::string open(const io::backend& b, server_context& server, unsigned index, std::mutex& mu);

    void join() {
        if (thread.joinable()) {
            thread.join();
        }
    }
};

/// Sums the counters of every loop that is open.
void add_stats(const std::vector<loop_thread>& loops, server_stats& st) noexcept;
/// Sums the request figures of every loop that is open and counts them.
void add_request_totals(const std::vector<loop_thread>& loops, request_totals& totals) noexcept;

} // namespace sluice::detail
