#include "summary.h"

#include <algorithm>
#include <cmath>

namespace sluice::load {

const char* error_kind_name(error_kind k) noexcept {
    switch (k) {
    case error_kind::none:
        return "none";
    case error_kind::connect:
        return "connect";
    case error_kind::timeout:
        return "timeout";
    case error_kind::reset:
        return "reset";
    case error_kind::non_2xx:
        return "non_2xx";
    case error_kind::other:
        return "other";
    }
    return "other";
}

double percentile(const std::vector<std::uint32_t>& sorted, double p) {
    if (sorted.empty()) {
        return 0;
    }
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    rank = std::clamp<std::size_t>(rank, 1, sorted.size());
    return sorted[rank - 1];
}

summary summarize(const std::vector<sample>& samples, double elapsed_s, double window_start_s,
                  double window_end_s, std::uint64_t bytes_received, std::uint64_t bytes_sent) {
    summary s;
    s.samples = samples.size();
    s.elapsed_s = elapsed_s;
    s.window_start_s = window_start_s;
    s.window_end_s = window_end_s;
    if (elapsed_s > 0) {
        s.throughput = static_cast<double>(s.samples) / elapsed_s;
        s.received_kbps = static_cast<double>(bytes_received) / 1024.0 / elapsed_s;
        s.sent_kbps = static_cast<double>(bytes_sent) / 1024.0 / elapsed_s;
    }
    if (samples.empty()) {
        return s;
    }
    std::vector<std::uint32_t> us;
    us.reserve(samples.size());
    // Welford's running mean and variance: no catastrophic cancellation over millions of samples.
    double mean = 0, m2 = 0;
    std::uint64_t n = 0;
    const auto w0 = window_start_s * 1000.0, w1 = window_end_s * 1000.0;
    for (const auto& x : samples) {
        us.push_back(x.latency_us);
        ++n;
        double d = x.latency_us - mean;
        mean += d / static_cast<double>(n);
        m2 += d * (x.latency_us - mean);
        if (x.error != error_kind::none) {
            ++s.errors[static_cast<std::size_t>(x.error)];
            ++s.error_count;
        }
        if (x.end_ms >= w0 && x.end_ms < w1) {
            ++s.window_samples;
        }
    }
    std::sort(us.begin(), us.end());
    s.avg_ms = mean / 1000.0;
    s.stddev_ms = std::sqrt(m2 / static_cast<double>(n)) / 1000.0; // population, as JMeter
    s.min_ms = us.front() / 1000.0;
    s.max_ms = us.back() / 1000.0;
    s.p50_ms = percentile(us, 50) / 1000.0;
    s.p90_ms = percentile(us, 90) / 1000.0;
    s.p95_ms = percentile(us, 95) / 1000.0;
    s.p99_ms = percentile(us, 99) / 1000.0;
    s.error_pct = 100.0 * static_cast<double>(s.error_count) / static_cast<double>(s.samples);
    if (window_end_s > window_start_s) {
        s.window_throughput = static_cast<double>(s.window_samples) / (window_end_s - window_start_s);
    }
    return s;
}

} // namespace sluice::load
