// The limiter's fast path: take a free permit and give it back (what a limited request that
// does not wait pays, besides its on_complete listener), alone and with threads contending.
#include <benchmark/benchmark.h>

#include <sluice/limiter.h>

namespace {

sluice::limiter& shared_limiter() {
    // One limiter for every thread of a multi-threaded run (the benchmark's threads share it).
    static sluice::limiter lim(
        {.permits = 1'000'000, .max_queue = 0, .wait_timeout = std::chrono::milliseconds(0)});
    return lim;
}

void limiter_take_and_release(benchmark::State& state) {
    sluice::limiter& lim = shared_limiter();
    for (auto _ : state) {
        sluice::permit p = lim.try_acquire();
        benchmark::DoNotOptimize(p);
    }
}
BENCHMARK(limiter_take_and_release)->Threads(1)->Threads(2)->UseRealTime();

} // namespace
