// Per-loop request counters for /metrics: requests by route, method and status class, and a
// latency histogram per route (docs/operations.md lists the families).
//
// One loop's thread writes (a relaxed load and store, no locked instruction: the request path
// takes no lock and shares no cache line with another loop); a scrape on any thread reads with
// relaxed loads and sums every loop's figures into a request_totals.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace sluice::detail {

/// The method label: the common methods by name, everything else "other" (a client must not be
/// able to create series at will).
inline constexpr std::array<std::string_view, 8> metric_methods{"GET",    "HEAD",  "POST",    "PUT",
                                                                "DELETE", "PATCH", "OPTIONS", "other"};
/// The code_class label: "1xx" to "5xx".
inline constexpr std::size_t status_classes = 5;
/// Upper bounds of the latency histogram in seconds (Prometheus' default buckets), +Inf implied.
inline constexpr std::array<double, 11> latency_buckets{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                        0.5,   1.0,  2.5,   5.0,  10.0};

std::size_t method_index(std::string_view method) noexcept;
/// 0 for 1xx ... 4 for 5xx; a status out of range counts as 5xx (the serializer sends 500).
std::size_t class_index(int status) noexcept;

/// The figures of one route, summed over loops.
struct route_totals {
    std::array<std::array<std::uint64_t, status_classes>, metric_methods.size()> requests{};
    std::array<std::uint64_t, latency_buckets.size() + 1> buckets{}; ///< per bucket, not cumulative
    std::uint64_t duration_ns = 0;
};

/// Every route's figures; index routes.size() of the router is "no route matched" (404, 405, and
/// requests that failed before routing).
using request_totals = std::vector<route_totals>;

class request_metrics {
public:
    /// `routes` is the router's size; one more slot counts unmatched requests.
    explicit request_metrics(std::size_t routes);

    /// Loop thread only. `route` past the router's size means unmatched.
    void observe(std::size_t route, std::string_view method, int status,
                 std::chrono::nanoseconds duration) noexcept;

    /// Adds this loop's figures to `totals` (sized routes + 1). Any thread.
    void add_to(request_totals& totals) const noexcept;

    std::size_t slots() const noexcept { return slots_; }

private:
    static constexpr std::size_t requests_at = 0;
    static constexpr std::size_t buckets_at = requests_at + metric_methods.size() * status_classes;
    static constexpr std::size_t duration_at = buckets_at + latency_buckets.size() + 1;
    static constexpr std::size_t stride = duration_at + 1;

    static void bump(std::atomic<std::uint64_t>& c, std::uint64_t d) noexcept {
        c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    }

    std::size_t slots_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> cells_;
};

} // namespace sluice::detail
