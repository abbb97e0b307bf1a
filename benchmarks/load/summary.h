// The statistics of a run, as JMeter's Summary Report shows them: samples, average, min, max,
// standard deviation, percentiles, errors by kind, throughput over the whole run and over a
// steady window, KB/s each way. Pure functions over the recorded samples, unit-tested.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::load {

enum class error_kind : std::uint8_t { none, connect, timeout, reset, non_2xx, other };
inline constexpr std::size_t error_kinds = 6;
const char* error_kind_name(error_kind k) noexcept;

/// One completed request (or failed attempt).
struct sample {
    std::uint32_t latency_us = 0; ///< from send to completion
    std::uint32_t end_ms = 0;     ///< completion, in ms since the start of the run
    error_kind error = error_kind::none;
};

struct summary {
    std::uint64_t samples = 0;
    double avg_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0;
    double p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0;
    std::array<std::uint64_t, error_kinds> errors{}; ///< by error_kind (index 0 unused)
    std::uint64_t error_count = 0;
    double error_pct = 0;
    double elapsed_s = 0;
    double throughput = 0; ///< samples / elapsed
    double window_start_s = 0, window_end_s = 0;
    std::uint64_t window_samples = 0;
    double window_throughput = 0; ///< samples completed in the window / its length
    double received_kbps = 0, sent_kbps = 0;
};

/// The p-th percentile (0 < p <= 100) of sorted values, nearest-rank (the smallest value with
/// at least p% of the values at or below it); 0 for none.
double percentile(const std::vector<std::uint32_t>& sorted, double p);

/// Latency statistics include every sample, failed ones too (JMeter does the same), so a
/// timeout shows in max and p99 rather than vanishing.
summary summarize(const std::vector<sample>& samples, double elapsed_s, double window_start_s,
                  double window_end_s, std::uint64_t bytes_received, std::uint64_t bytes_sent);

} // namespace sluice::load
