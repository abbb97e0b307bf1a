#include "metrics/request_metrics.h"

#include <algorithm>

namespace sluice::detail {

std::size_t method_index(std::string_view method) noexcept {
    for (std::size_t i = 0; i + 1 < metric_methods.size(); ++i) {
        if (metric_methods[i] == method) {
            return i;
        }
    }
    return metric_methods.size() - 1;
}

std::size_t class_index(int status) noexcept {
    if (status < 100 || status > 599) {
        return status_classes - 1;
    }
    return static_cast<std::size_t>(status / 100 - 1);
}

request_metrics::request_metrics(std::size_t routes)
    : slots_(routes + 1), cells_(std::make_unique<std::atomic<std::uint64_t>[]>(slots_ * stride)) {}

void request_metrics::observe(std::size_t route, std::string_view method, int status,
                              std::chrono::nanoseconds duration) noexcept {
    route = std::min(route, slots_ - 1);
    std::atomic<std::uint64_t>* cell = &cells_[route * stride];
    bump(cell[requests_at + method_index(method) * status_classes + class_index(status)], 1);
    const double seconds = std::chrono::duration<double>(duration).count();
    // The first bucket whose upper bound holds the duration (Prometheus' "le": less or equal).
    const auto bucket = static_cast<std::size_t>(
        std::lower_bound(latency_buckets.begin(), latency_buckets.end(), seconds) - latency_buckets.begin());
    bump(cell[buckets_at + bucket], 1);
    bump(cell[duration_at], static_cast<std::uint64_t>(std::max<std::int64_t>(duration.count(), 0)));
}

void request_metrics::add_to(request_totals& totals) const noexcept {
    const std::size_t n = std::min(slots_, totals.size());
    for (std::size_t r = 0; r < n; ++r) {
        const std::atomic<std::uint64_t>* cell = &cells_[r * stride];
        route_totals& t = totals[r];
        for (std::size_t m = 0; m < metric_methods.size(); ++m) {
            for (std::size_t c = 0; c < status_classes; ++c) {
                t.requests[m][c] +=
                    cell[requests_at + m * status_classes + c].load(std::memory_order_relaxed);
            }
        }
        for (std::size_t b = 0; b < t.buckets.size(); ++b) {
            t.buckets[b] += cell[buckets_at + b].load(std::memory_order_relaxed);
        }
        t.duration_ns += cell[duration_at].load(std::memory_order_relaxed);
    }
}

} // namespace sluice::detail
