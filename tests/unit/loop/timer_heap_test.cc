#include "loop/timer_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

TEST(timer_heap, pops_in_deadline_order_and_fifo_for_ties) {
    timer_heap h;
    const auto t0 = clock::time_point{};
    timer a, b, c, d;
    h.arm(a, t0 + milliseconds(30));
    h.arm(b, t0 + milliseconds(10));
    h.arm(c, t0 + milliseconds(20));
    h.arm(d, t0 + milliseconds(10)); // same deadline as b, armed later
    std::vector<timer*> order;
    while (timer* t = h.pop_due(t0 + milliseconds(100))) {
        order.push_back(t);
    }
    EXPECT_EQ(order, (std::vector<timer*>{&b, &d, &c, &a}));
    EXPECT_TRUE(h.empty());
}

TEST(timer_heap, nothing_is_due_before_its_deadline) {
    timer_heap h;
    timer a;
    h.arm(a, clock::time_point{} + milliseconds(5));
    EXPECT_EQ(h.pop_due(clock::time_point{} + milliseconds(4)), nullptr);
    EXPECT_EQ(h.pop_due(clock::time_point{} + milliseconds(5)), &a);
    EXPECT_FALSE(a.armed());
}

TEST(timer_heap, rearming_moves_both_ways_and_cancel_removes) {
    timer_heap h;
    const auto t0 = clock::time_point{};
    timer a, b;
    h.arm(a, t0 + milliseconds(10));
    h.arm(b, t0 + milliseconds(20));
    h.arm(a, t0 + milliseconds(30)); // later
    EXPECT_EQ(h.next(), t0 + milliseconds(20));
    h.arm(a, t0 + milliseconds(5)); // earlier again
    EXPECT_EQ(h.next(), t0 + milliseconds(5));
    h.cancel(a);
    EXPECT_FALSE(a.armed());
    h.cancel(a); // cancelling twice is harmless
    EXPECT_EQ(h.size(), 1u);
    EXPECT_EQ(h.pop_due(t0 + milliseconds(100)), &b);
}

// A model check: random arm / re-arm / cancel against a sorted reference.
TEST(timer_heap, matches_a_reference_under_random_operations) {
    std::mt19937 rng(42);
    timer_heap h;
    std::vector<std::unique_ptr<timer>> timers;
    for (int i = 0; i < 200; ++i) {
        timers.push_back(std::make_unique<timer>());
    }
    for (int step = 0; step < 20'000; ++step) {
        timer& t = *timers[rng() % timers.size()];
        if (rng() % 4 == 0) {
            h.cancel(t);
        } else {
            h.arm(t, clock::time_point{} + milliseconds(rng() % 1000));
        }
    }
    std::vector<clock::time_point> expected;
    for (const auto& t : timers) {
        if (t->armed()) {
            expected.push_back(t->when);
        }
    }
    std::sort(expected.begin(), expected.end());
    std::vector<clock::time_point> got;
    while (timer* t = h.pop_due(clock::time_point::max())) {
        got.push_back(t->when);
    }
    EXPECT_EQ(got, expected);
}

} // namespace
} // namespace sluice::detail
