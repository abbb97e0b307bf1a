// The async contract's costs, on a real loop (the epoll driver; its wake-up is an eventfd):
// - a suspend → complete round trip when complete() runs on the loop's own thread (a callback
//   of an upstream call, a loop timer): start, the handler's return, complete() posting the
//   signal, the loop running it, the host taking the response;
// - the same when complete() comes from another thread (a worker pool, a foreign library):
//   the post wakes the loop, which must notice, run the task and signal back;
// - a bare mailbox post round trip across threads (post → wake → task runs → the poster sees it).
// The connection's own work around the signal (leave_suspended, finish) is in the path and
// scenario figures, not here.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <sluice/async_context.h>
#include <sluice/backend.h>
#include <sluice/log.h>
#include <sluice/response.h>

#include "exchange/async_state.h"
#include "loop/loop.h"

namespace {

using namespace sluice;
using namespace sluice::detail;

std::unique_ptr<io::driver> epoll_driver() {
    for (const io::backend* b : io::registered_backends()) {
        if (b->name == "epoll") {
            std::string error;
            return b->create(io::driver_options{}, error);
        }
    }
    return nullptr;
}

// The connection's part: count the signals and take the response.
struct counting_host final : async_host {
    std::atomic<std::uint64_t> signals{0};
    async_state* current = nullptr;
    void on_async_signal(std::uint64_t /*generation*/) noexcept override {
        std::optional<response> handed;
        if (current != nullptr && current->take_completion(handed)) {
            benchmark::DoNotOptimize(handed);
        }
        signals.fetch_add(1, std::memory_order_release);
    }
    void on_async_timeout_changed(std::uint64_t /*generation*/) noexcept override {}
    void on_async_drain_wanted(std::uint64_t /*generation*/) noexcept override {}
};

// A loop running on a thread of its own until the benchmark ends.
struct loop_thread {
    logger log{log_level::error};
    std::unique_ptr<detail::loop> l;
    std::thread t;

    bool start() {
        auto d = epoll_driver();
        if (!d) {
            return false;
        }
        l = std::make_unique<detail::loop>(std::move(d), log, 0);
        t = std::thread([this] { l->run(); });
        return true;
    }
    ~loop_thread() {
        if (l) {
            l->stop();
            t.join();
        }
    }
};

void bm_suspend_complete_same_loop(benchmark::State& state) {
    logger log{log_level::error};
    auto d = epoll_driver();
    if (!d) {
        state.SkipWithError("no epoll driver");
        return;
    }
    detail::loop l(std::move(d), log, 0);
    counting_host host;
    std::uint64_t generation = 0;
    for (auto _ : state) {
        auto* st = new async_state(l.executor_port(), &host, ++generation);
        async_context ctx(st);
        host.current = st;
        if (!st->start(std::chrono::milliseconds(0)) ||
            st->handler_returned() != async_state::after_dispatch::suspend) {
            state.SkipWithError("did not suspend");
            break;
        }
        ctx.complete(response(200));
        l.run(detail::loop::run_mode::until_idle); // runs the posted signal
        host.current = nullptr;
    }
    if (host.signals.load() != static_cast<std::uint64_t>(state.iterations())) {
        state.SkipWithError("a signal was lost");
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_suspend_complete_same_loop);

void bm_suspend_complete_cross_thread(benchmark::State& state) {
    loop_thread lt;
    if (!lt.start()) {
        state.SkipWithError("no epoll driver");
        return;
    }
    counting_host host;
    std::uint64_t generation = 0;
    std::uint64_t seen = 0;
    for (auto _ : state) {
        // Suspending happens on the loop in real life; the state machine does not care which
        // thread the first two steps run on as long as they precede the complete().
        auto* st = new async_state(lt.l->executor_port(), &host, ++generation);
        async_context ctx(st);
        host.current = st;
        (void)st->start(std::chrono::milliseconds(0));
        (void)st->handler_returned();
        ctx.complete(response(200)); // from this (foreign) thread
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (host.signals.load(std::memory_order_acquire) == seen) {
            if (std::chrono::steady_clock::now() > deadline) {
                state.SkipWithError("the loop did not signal within 5 s");
                return;
            }
        }
        ++seen;
        host.current = nullptr;
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_suspend_complete_cross_thread)->UseRealTime();

void bm_mailbox_post_round_trip(benchmark::State& state) {
    loop_thread lt;
    if (!lt.start()) {
        state.SkipWithError("no epoll driver");
        return;
    }
    std::atomic<std::uint64_t> ran{0};
    std::uint64_t seen = 0;
    for (auto _ : state) {
        if (!lt.l->port().post([&ran] { ran.fetch_add(1, std::memory_order_release); })) {
            state.SkipWithError("post refused");
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (ran.load(std::memory_order_acquire) == seen) {
            if (std::chrono::steady_clock::now() > deadline) {
                state.SkipWithError("the task did not run within 5 s");
                return;
            }
        }
        ++seen;
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_mailbox_post_round_trip)->UseRealTime();

} // namespace
