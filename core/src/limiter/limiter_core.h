// The shared state of a limiter: permits in use, the FIFO queue of waiters, the counters.
//
// A waiter's life (every transition under the core's mutex):
//
//   [idle] --admit: a permit is free and nobody waits--------------------> [running]
//     |                                                                      ^   |
//     +--enqueue--> [queued] --a permit is released: handed over--> [granted]|   | release:
//     |               |  |                                          (resumed)-+   | exchange ended
//     |               |  +--wait_timeout / client gone / cancel--> [done]         | or permit dropped
//     +--queue full------------------------------------------------> [done] <----+
//
// A permit is handed from the releaser straight to the first waiter, so in_use never dips
// while someone waits and a newcomer cannot overtake the queue.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>

#include <sluice/async_context.h>
#include <sluice/limiter.h>

namespace sluice::detail {

struct limiter_waiter {
    enum class phase : std::uint8_t { idle, queued, granted, running, done };

    // Everything below is guarded by the core's mutex.
    phase ph = phase::idle;
    std::list<std::shared_ptr<limiter_waiter>>::iterator pos; // valid while queued
    // How to wake the waiter. Moved out when the waiter leaves the queue, so that a waiter
    // holds its exchange's async state only while it waits (the state's listeners hold the
    // waiter: the cycle lasts as long as the wait, and every way out of the queue breaks it).
    struct wake {
        async_context ctx;     ///< an exchange waiter: resumed
        executor exec;         ///< an acquire() waiter: its callback is posted here
        acquire_callback done; ///< ... with the permit or the error
    };
    wake how;
    std::weak_ptr<limiter_core> core; // for wait_handle::cancel
};

class limiter_core : public std::enable_shared_from_this<limiter_core> {
public:
    explicit limiter_core(const limiter_options& o) : opts_(o) {}

    const limiter_options& options() const noexcept { return opts_; }
    limiter_stats stats() const noexcept;

    enum class admission { granted, must_wait, rejected };
    /// idle -> running when a permit is free and nobody waits; counts a rejection when the queue
    /// is full; otherwise the caller must prepare to wait and call enqueue().
    admission admit(limiter_waiter& w) noexcept;
    /// idle -> granted (a permit came free meanwhile), queued (must_wait; `how` moves into the
    /// waiter), or done (queue full: rejected).
    admission enqueue(const std::shared_ptr<limiter_waiter>& w, limiter_waiter::wake& how) noexcept;
    /// A permit goes back: to the first waiter, or to the pool.
    void release() noexcept;
    /// try_acquire(): idle -> running without a waiter object.
    bool try_take() noexcept;

    enum class redispatch { first, again, none };
    /// The limited handler runs again: granted -> running (first), running (again), or none.
    redispatch enter(limiter_waiter& w) noexcept;
    /// queued -> done as timed out; false when the waiter is elsewhere. What would have woken
    /// the waiter is moved into `how`.
    bool time_out(limiter_waiter& w, limiter_waiter::wake& how) noexcept;
    /// queued -> done as cancelled; as time_out.
    bool cancel(limiter_waiter& w, limiter_waiter::wake& how) noexcept;
    /// The waiter's exchange ended: leaves the queue, or releases the permit it holds.
    void ended(limiter_waiter& w) noexcept;

    /// Posts `done(ec, p)` to `on`; if that fails, the permit is released where it is dropped.
    static void post_result(const executor& on, acquire_callback done, std::error_code ec, permit p) noexcept;

private:
    struct handoff; // what release() must do once the mutex is unlocked
    bool leave_queue(limiter_waiter& w, limiter_waiter::wake& how) noexcept;
    void release_locked(handoff& h) noexcept;
    void finish(handoff& h) noexcept;
    bool permit_free_locked() const noexcept { return in_use_ < opts_.permits && queue_.empty(); }
    void take_locked() noexcept;

    const limiter_options opts_;
    mutable std::mutex mu_;
    std::list<std::shared_ptr<limiter_waiter>> queue_;
    std::size_t queued_ = 0; // queue_.size(), kept to avoid relying on list::size cost guarantees
    std::size_t in_use_ = 0;
    std::size_t max_in_use_ = 0;
    std::uint64_t granted_ = 0;
    std::uint64_t rejected_ = 0;
    std::uint64_t timed_out_ = 0;
    std::uint64_t cancelled_ = 0;
};

} // namespace sluice::detail
