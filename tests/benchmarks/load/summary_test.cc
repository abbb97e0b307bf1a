// sluice-load's statistics: percentiles, mean and std dev, errors by kind, the steady window.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "summary.h"

namespace sluice::load {
namespace {

std::vector<std::uint32_t> one_to(std::uint32_t n) {
    std::vector<std::uint32_t> v;
    for (std::uint32_t i = 1; i <= n; ++i) {
        v.push_back(i);
    }
    return v;
}

TEST(LoadSummary, PercentileIsNearestRank) {
    auto v = one_to(100);
    EXPECT_EQ(percentile(v, 50), 50);
    EXPECT_EQ(percentile(v, 90), 90);
    EXPECT_EQ(percentile(v, 99), 99);
    EXPECT_EQ(percentile(v, 100), 100);
    auto w = one_to(10);
    EXPECT_EQ(percentile(w, 99), 10); // ceil(9.9) = 10th
    EXPECT_EQ(percentile(w, 1), 1);
    EXPECT_EQ(percentile({}, 50), 0);
    EXPECT_EQ(percentile({7}, 99), 7);
}

TEST(LoadSummary, MeanMinMaxAndPopulationStdDev) {
    // 2, 4, 4, 4, 5, 5, 7, 9 ms: mean 5, population std dev 2 (the textbook example).
    std::vector<sample> s;
    for (std::uint32_t ms : {2u, 4u, 4u, 4u, 5u, 5u, 7u, 9u}) {
        s.push_back({ms * 1000, 100, error_kind::none});
    }
    auto r = summarize(s, 2.0, 0, 2.0, 2048, 1024);
    EXPECT_EQ(r.samples, 8u);
    EXPECT_DOUBLE_EQ(r.avg_ms, 5.0);
    EXPECT_NEAR(r.stddev_ms, 2.0, 1e-9);
    EXPECT_DOUBLE_EQ(r.min_ms, 2.0);
    EXPECT_DOUBLE_EQ(r.max_ms, 9.0);
    EXPECT_DOUBLE_EQ(r.p50_ms, 4.0);
    EXPECT_DOUBLE_EQ(r.throughput, 4.0);
    EXPECT_DOUBLE_EQ(r.received_kbps, 1.0);
    EXPECT_DOUBLE_EQ(r.sent_kbps, 0.5);
    EXPECT_EQ(r.error_count, 0u);
}

TEST(LoadSummary, ErrorsByKindAndFailedSamplesInTheLatencies) {
    std::vector<sample> s(6, {1000, 10, error_kind::none});
    s.push_back({30'000'000, 20, error_kind::timeout});
    s.push_back({500, 20, error_kind::connect});
    s.push_back({800, 20, error_kind::reset});
    s.push_back({900, 20, error_kind::non_2xx});
    auto r = summarize(s, 1.0, 0, 1.0, 0, 0);
    EXPECT_EQ(r.error_count, 4u);
    EXPECT_DOUBLE_EQ(r.error_pct, 40.0);
    EXPECT_EQ(r.errors[static_cast<std::size_t>(error_kind::timeout)], 1u);
    EXPECT_EQ(r.errors[static_cast<std::size_t>(error_kind::connect)], 1u);
    EXPECT_EQ(r.errors[static_cast<std::size_t>(error_kind::reset)], 1u);
    EXPECT_EQ(r.errors[static_cast<std::size_t>(error_kind::non_2xx)], 1u);
    EXPECT_DOUBLE_EQ(r.max_ms, 30'000.0); // the timeout is in the latencies, as in JMeter
}

TEST(LoadSummary, SteadyWindowCountsCompletionsInsideHalfOpenRange) {
    std::vector<sample> s;
    for (std::uint32_t ms = 0; ms < 10'000; ms += 10) { // 100/s for 10 s
        s.push_back({1000, ms, error_kind::none});
    }
    auto r = summarize(s, 10.0, 2.0, 8.0, 0, 0);
    EXPECT_EQ(r.window_samples, 600u);
    EXPECT_DOUBLE_EQ(r.window_throughput, 100.0);
    EXPECT_DOUBLE_EQ(r.throughput, 100.0);
}

TEST(LoadSummary, EmptyRunIsAllZeros) {
    auto r = summarize({}, 0, 0, 0, 0, 0);
    EXPECT_EQ(r.samples, 0u);
    EXPECT_DOUBLE_EQ(r.throughput, 0);
    EXPECT_DOUBLE_EQ(r.p99_ms, 0);
}

} // namespace
} // namespace sluice::load
