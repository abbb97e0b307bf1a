// Timers for one loop: an intrusive binary min-heap (libuv keeps a heap too).
//
// A timer is a small struct embedded in its owner; arming, re-arming and cancelling
// cost O(log n) and allocate nothing once the heap's vector has grown. Owners that
// re-arm often (connection deadlines) keep one armed timer and move their deadline
// lazily: see connection.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace sluice::detail {

using clock = std::chrono::steady_clock;

struct timer {
    using callback = void (*)(timer&) noexcept;

    explicit timer(callback cb = nullptr, void* context = nullptr) noexcept : fire(cb), ctx(context) {}
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;
    ~timer() = default;

    bool armed() const noexcept { return index != not_armed; }

    static constexpr std::uint32_t not_armed = ~std::uint32_t{0};
    clock::time_point when{};
    std::uint64_t seq = 0; ///< ties broken in arming order, so equal deadlines fire FIFO
    std::uint32_t index = not_armed;
    callback fire;
    void* ctx;                  ///< for the callback: usually the owning object
    bool owned_by_loop = false; ///< a loop::call_after timer: the loop deletes it at teardown
};

class timer_heap {
public:
    /// Arms t at `when`, or moves it there if already armed.
    void arm(timer& t, clock::time_point when);
    void cancel(timer& t) noexcept;
    bool empty() const noexcept { return heap_.empty(); }
    std::size_t size() const noexcept { return heap_.size(); }
    /// The earliest deadline; only when !empty().
    clock::time_point next() const noexcept { return heap_.front()->when; }
    /// Removes and returns the earliest timer if it is due at `now`, else null.
    timer* pop_due(clock::time_point now) noexcept;
    /// Every armed timer, for teardown.
    const std::vector<timer*>& armed_timers() const noexcept { return heap_; }

private:
    static bool before(const timer* a, const timer* b) noexcept {
        return a->when < b->when || (a->when == b->when && a->seq < b->seq);
    }
    void sift_up(std::uint32_t i) noexcept;
    void sift_down(std::uint32_t i) noexcept;
    void place(timer* t, std::uint32_t i) noexcept {
        heap_[i] = t;
        t->index = i;
    }

    std::vector<timer*> heap_;
    std::uint64_t seq_ = 0;
};

} // namespace sluice::detail
