// Says loudly when a handler blocks an I/O loop (dispatch = inline with a sync,
// blocking handler stalls every connection of that loop: S2's 59x lesson).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <sluice/log.h>

namespace sluice::detail {

class loop;

class watchdog {
public:
    /// Each report adds one to `events` (shown on /metrics), which outlives the watchdog.
    watchdog(std::vector<const loop*> loops, std::uint32_t threshold_ms, const logger& log,
             std::atomic<std::uint64_t>& events);
    ~watchdog();
    watchdog(const watchdog&) = delete;
    watchdog& operator=(const watchdog&) = delete;

private:
    void run();

    std::vector<const loop*> loops_;
    std::vector<std::int64_t> reported_; // busy_since already reported, per loop
    std::uint32_t threshold_ms_;
    const logger& log_;
    std::atomic<std::uint64_t>& events_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread thread_;
};

} // namespace sluice::detail
