// Loop timers: arming and cancelling one timer in a heap that already holds N others (a
// loop with N connections, each with a deadline armed), and moving an armed one later (what a
// connection's deadline does when it is re-armed eagerly; connection.cc moves it lazily).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "loop/timer_heap.h"

namespace {

using namespace sluice::detail;

struct populated_heap {
    timer_heap heap;
    std::vector<std::unique_ptr<timer>> others;
    clock::time_point base = clock::now();

    explicit populated_heap(std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) {
            others.push_back(std::make_unique<timer>());
            // Spread over 60 s, as idle deadlines of connections that arrived over time are.
            heap.arm(*others.back(), base + std::chrono::microseconds((i * 7919) % 60'000'000));
        }
    }
    ~populated_heap() {
        for (auto& t : others) {
            heap.cancel(*t);
        }
    }
};

void bm_timer_arm_cancel(benchmark::State& state) {
    populated_heap p(state.range(0));
    timer t;
    std::int64_t i = 0;
    for (auto _ : state) {
        p.heap.arm(t, p.base + std::chrono::microseconds((++i * 104'729) % 60'000'000));
        p.heap.cancel(t);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_timer_arm_cancel)->Arg(0)->Arg(1'000)->Arg(10'000);

void bm_timer_move_armed(benchmark::State& state) {
    populated_heap p(state.range(0));
    timer t;
    p.heap.arm(t, p.base);
    std::int64_t i = 0;
    for (auto _ : state) {
        p.heap.arm(t, p.base + std::chrono::microseconds((++i * 104'729) % 60'000'000));
    }
    p.heap.cancel(t);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_timer_move_armed)->Arg(1'000)->Arg(10'000);

} // namespace
