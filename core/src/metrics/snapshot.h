// Everything /metrics shows, gathered at scrape time (admin.cc), and its rendering in the
// Prometheus text format. Gathering and rendering are apart so the format is unit-tested on
// a snapshot built by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sluice/client.h>
#include <sluice/limiter.h>
#include <sluice/server.h>

#include "metrics/request_metrics.h"

namespace sluice::detail {

struct limiter_figures {
    std::string name;
    limiter_stats stats;
    std::size_t permits = 0;
};

struct client_figures {
    std::string name;
    client_stats stats;
};

struct process_figures {
    std::uint64_t resident_bytes = 0;
    std::uint64_t threads = 0;
    double cpu_seconds = 0;
    std::uint64_t open_fds = 0;
};

struct access_log_figures {
    std::uint64_t written = 0;      ///< lines written
    std::uint64_t dropped = 0;      ///< lines dropped because a loop's queue was full
    std::uint64_t write_errors = 0; ///< lines lost to a failed open or write
};

struct metrics_snapshot {
    server_stats server;
    std::vector<std::string> routes; ///< templates by route index; requests has one more slot
    request_totals requests;
    std::vector<limiter_figures> limiters;
    std::vector<client_figures> clients;
    std::uint64_t watchdog_events = 0;
    double loop_busy_seconds = 0; ///< the longest current loop iteration
    bool access_log_on = false;
    access_log_figures access_log;
    bool ready = false;
    process_figures process;
};

/// The route label of requests that matched no route (404, 405, failed before routing).
inline constexpr std::string_view unmatched_route = "(unmatched)";

std::string render_metrics(const metrics_snapshot& s);

/// /proc/self figures; zeros where /proc cannot be read.
process_figures read_process_figures() noexcept;

} // namespace sluice::detail
