#include "server/watchdog.h"

#include <chrono>

#include "loop/loop.h"

namespace sluice::detail {

watchdog::watchdog(std::vector<const loop*> loops, std::uint32_t threshold_ms, const logger& log,
                   std::atomic<std::uint64_t>& events)
    : loops_(std::move(loops)), reported_(loops_.size(), 0), threshold_ms_(threshold_ms), log_(log),
      events_(events) {
    thread_ = std::thread([this] { run(); });
}

watchdog::~watchdog() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void watchdog::run() {
    const auto period = std::chrono::milliseconds(std::max<std::uint32_t>(threshold_ms_ / 4, 10));
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
        const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
        for (std::size_t i = 0; i < loops_.size(); ++i) {
            const std::int64_t since = loops_[i]->busy_since_ns();
            if (since == 0 || since == reported_[i]) {
                continue;
            }
            const std::int64_t stuck_ms = (now - since) / 1'000'000;
            if (stuck_ms >= threshold_ms_) {
                reported_[i] = since;
                events_.fetch_add(1, std::memory_order_relaxed);
                log_.warn("WATCHDOG: I/O loop {} has been stuck for {} ms in one iteration: a handler is "
                          "blocking the I/O thread and every connection of this loop waits. Use "
                          "start_async() for waits, or dispatch = pool for blocking handlers.",
                          loops_[i]->index(), stuck_ms);
            }
        }
    }
}

} // namespace sluice::detail
