// The runner of one coroutine handler: owns the handler's coroutine frame, resumes it on
// the exchange's loop, and cancels its pending await when the exchange ends.
//
//                 launch() on the dispatching thread (the first segment)
//   [running] <-----------------------------------------------------------------+
//     |   | co_await of an async_op: op_begin()         posted resume_from(op) |
//     |   +--------------------------------------> [waiting on op] ------------+
//     |                                              |  exchange ends: the timeout expired
//     |                                              |  (no on_timeout listener completed,
//     |                                              |  resumed or re-armed) / on_error
//     | co_return / throw                            v  end(): op cancelled, resumed at once
//     v                                          [running, cancelled] (awaits fail at once;
//                                                 what it writes is dropped)
//   [finished]: frame destroyed by the resumer;
//     not cancelled: complete(), or resume() to rethrow in a re-dispatch; cancelled: nothing
//   on_complete (exchange released): a frame still alive is destroyed; the listeners'
//   reference is dropped.
//
// Threads: launch() runs where the handler runs; everything else runs on the exchange's loop
// thread (posted resumptions, the listeners). The two can only overlap in pool mode, where an
// operation may complete before the worker's first resume() has returned: launch_mu_ makes the
// loop wait for it, so the frame is only ever run by one thread at a time.
//
// Lifetime: one reference for the listeners (dropped in on_complete, which the async contract
// fires exactly once) plus one per op that has begun (an op may outlive the exchange: a timer
// still armed, a completion still held by a foreign thread).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>

#include <sluice/async_context.h>
#include <sluice/async_op.h>
#include <sluice/executor.h>
#include <sluice/response.h>

namespace sluice::detail {

class coro_run {
public:
    /// res: the exchange's response, which outlives the frame (see Lifetime above).
    coro_run(async_context ctx, executor loop, std::coroutine_handle<> frame, response& res) noexcept
        : ctx_(std::move(ctx)), loop_(std::move(loop)), frame_(frame), response_(&res) {}
    coro_run(const coro_run&) = delete;
    coro_run& operator=(const coro_run&) = delete;

    void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete this;
        }
    }

    /// The dispatching thread: runs the first segment. Returns true when the coroutine finished
    /// within it (error() then says how); the caller then ends the exchange itself.
    bool launch();
    std::exception_ptr error() const noexcept { return error_; }

    /// The coroutine's thread: op_begin / op_abandon.
    bool begin(op_base* op, std::coroutine_handle<> waiter) noexcept;
    void abandon(op_base* op) noexcept;
    /// From the final awaiter of the handler's task.
    void finished(std::exception_ptr error) noexcept;

    /// The loop thread: a settled op's posted resumption.
    void resume_from(op_base* op) noexcept;
    /// The loop thread: the exchange is ending — its timeout expired (the expiry hook, after the
    /// on_timeout listeners) or on_error.
    void end() noexcept;
    /// The loop thread: on_complete — the exchange is being released.
    void on_complete() noexcept;

    const executor& loop() const noexcept { return loop_; }

private:
    ~coro_run();
    /// Resumes h (the handler's frame or a nested one) and, if the handler's task finished,
    /// destroys the frame and concludes.
    void step(std::coroutine_handle<> h) noexcept;
    void conclude() noexcept;
    /// Cancels and drops the pending op; returns the coroutine waiting on it (or null).
    std::coroutine_handle<> cancel_pending() noexcept;

    std::mutex launch_mu_;
    std::atomic<std::uint32_t> refs_{1};
    async_context ctx_;
    executor loop_;
    std::coroutine_handle<> frame_;
    response* response_;         // the exchange's; read and written on the coroutine's thread
    op_base* pending_ = nullptr; // holds a reference
    std::exception_ptr error_;
    bool launching_ = false;
    bool finished_ = false;
    bool cancelled_ = false;
};

/// The attribute through which a coroutine's exception reaches the re-dispatched handler.
inline constexpr const char* coroutine_exception_attribute = "sluice.coroutine.exception";

} // namespace sluice::detail
