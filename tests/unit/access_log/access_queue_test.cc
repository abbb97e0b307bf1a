// The per-loop access log queue: bounded, dropping (and counting) when full, never waiting.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "access_log/access_queue.h"

namespace sluice::detail {
namespace {

bool push(access_queue& q, const std::string& text) {
    std::string* s = q.reserve();
    if (s == nullptr) {
        return false;
    }
    *s = text;
    q.commit();
    return true;
}

TEST(access_queue, full_drops_and_counts_then_frees_on_drain) {
    access_queue q(4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_TRUE(push(q, std::to_string(i)));
    }
    EXPECT_FALSE(push(q, "x"));
    EXPECT_FALSE(push(q, "y"));
    EXPECT_EQ(q.dropped(), 2U);
    std::vector<std::string> got;
    EXPECT_EQ(q.drain([&](const std::string& s) noexcept { got.push_back(s); }), 4U);
    EXPECT_EQ(got, (std::vector<std::string>{"0", "1", "2", "3"}));
    EXPECT_TRUE(push(q, "4"));
    got.clear();
    q.drain([&](const std::string& s) noexcept { got.push_back(s); });
    EXPECT_EQ(got, (std::vector<std::string>{"4"}));
}

// One producer and one consumer on their own threads (TSan checks the ordering): every line is
// either delivered intact, in order, or counted as dropped.
TEST(access_queue, producer_and_consumer_threads) {
    access_queue q(64);
    constexpr int n = 20000;
    std::vector<int> got;
    std::atomic<bool> done{false};
    std::thread consumer([&] {
        auto take = [&](const std::string& s) noexcept { got.push_back(std::stoi(s)); };
        while (!done.load()) {
            q.drain(take);
        }
        q.drain(take);
    });
    for (int i = 0; i < n; ++i) {
        push(q, std::to_string(i));
    }
    done.store(true);
    consumer.join();
    EXPECT_EQ(got.size() + q.dropped(), static_cast<std::size_t>(n));
    for (std::size_t i = 1; i < got.size(); ++i) {
        ASSERT_LT(got[i - 1], got[i]);
    }
}

} // namespace
} // namespace sluice::detail
