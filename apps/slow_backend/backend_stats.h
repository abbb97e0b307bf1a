// Requests in flight at the backend (S1's "max in-flight at backend" column).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace slow_backend {

class backend_stats {
public:
    void begin() noexcept {
        const std::int64_t now = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
        std::int64_t seen = max_in_flight_.load(std::memory_order_relaxed);
        while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
        }
    }
    /// served: the request was answered (not cut short by its client leaving).
    void end(bool served) noexcept {
        in_flight_.fetch_sub(1, std::memory_order_relaxed);
        if (served) {
            served_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    /// Zeroes served and restarts the maximum from what is in flight now (in_flight is a gauge:
    /// zeroing it under load would make it negative when those requests end).
    void reset() noexcept {
        served_.store(0, std::memory_order_relaxed);
        max_in_flight_.store(in_flight_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    std::string json() const {
        return "{\"in_flight\":" + std::to_string(in_flight_.load(std::memory_order_relaxed)) +
               ",\"max_in_flight\":" + std::to_string(max_in_flight_.load(std::memory_order_relaxed)) +
               ",\"served\":" + std::to_string(served_.load(std::memory_order_relaxed)) + "}";
    }

private:
    std::atomic<std::int64_t> in_flight_{0};
    std::atomic<std::int64_t> max_in_flight_{0};
    std::atomic<std::uint64_t> served_{0};
};

} // namespace slow_backend
