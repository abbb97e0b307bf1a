#include "coro/coro_run.h"

#include <stdexcept>
#include <type_traits>
#include <utility>

namespace sluice::detail {

// end() sets the response aside while a cancelled coroutine runs: it must not throw.
static_assert(std::is_nothrow_move_constructible_v<response> && std::is_nothrow_move_assignable_v<response> &&
              std::is_nothrow_default_constructible_v<response>);

coro_run::~coro_run() {
    // on_complete destroyed the frame and dropped pending_ before the last reference went; this
    // only matters if the exchange was torn down without it.
    if (pending_ != nullptr) {
        pending_->release();
    }
    if (frame_) {
        frame_.destroy();
    }
}

bool coro_run::launch() {
    std::lock_guard lock(launch_mu_);
    launching_ = true;
    step(frame_);
    launching_ = false;
    return finished_;
}

bool coro_run::begin(op_base* op, std::coroutine_handle<> waiter) noexcept {
    if (cancelled_) {
        op->cancel(std::make_error_code(std::errc::operation_canceled));
        return false;
    }
    retain(); // the op's
    op->bind(this, waiter);
    op->retain(); // pending_'s
    pending_ = op;
    return true;
}

void coro_run::abandon(op_base* op) noexcept {
    if (pending_ == op) {
        pending_ = nullptr;
        op->cancel(std::make_error_code(std::errc::operation_canceled));
        op->release();
    }
}

void coro_run::finished(std::exception_ptr error) noexcept {
    finished_ = true;
    error_ = std::move(error);
}

void coro_run::step(std::coroutine_handle<> h) noexcept {
    // resume() does not throw: a task's body catches everything into its promise.
    h.resume();
    if (!finished_ || !frame_) {
        return;
    }
    // The frame is at its final suspend point: its locals are gone, and so is every use of the
    // exchange. Destroy it before the exchange's terminal transition, which conclude() causes.
    std::exchange(frame_, {}).destroy();
    if (!launching_) {
        conclude();
    }
}

void coro_run::conclude() noexcept {
    if (cancelled_) {
        return; // the exchange is ending already (timeout, disconnect, stop): nothing to send
    }
    if (error_) {
        // Re-dispatch so that the handler rethrows it: the connection's own path for a throwing
        // handler answers 500, or cuts a stream whose head went out, and logs the route.
        try {
            ctx_.set_attribute(coroutine_exception_attribute, error_);
            ctx_.resume();
            return;
        } catch (...) {
            ctx_.complete(response(500)); // out of memory for the attribute: answer 500 directly
            return;
        }
    }
    ctx_.complete();
}

void coro_run::resume_from(op_base* op) noexcept {
    // Waits for a first segment still running on a worker (pool mode): see the header.
    std::lock_guard lock(launch_mu_);
    if (pending_ != op || !frame_) {
        return; // cancelled meanwhile: end() resumed the coroutine already
    }
    pending_ = nullptr;
    op->drop_canceller();
    const std::coroutine_handle<> waiter = op->waiter();
    op->release();
    step(waiter);
}

std::coroutine_handle<> coro_run::cancel_pending() noexcept {
    op_base* op = std::exchange(pending_, nullptr);
    if (op == nullptr) {
        return {};
    }
    // A completion may have settled it already (its resumption still queued): the coroutine then
    // gets that outcome now, and the queued resumption finds nothing to do.
    op->cancel(std::make_error_code(std::errc::operation_canceled));
    const std::coroutine_handle<> waiter = op->waiter();
    op->release();
    return waiter;
}

void coro_run::end() noexcept {
    if (cancelled_) {
        return;
    }
    cancelled_ = true;
    if (!frame_) {
        return;
    }
    if (const std::coroutine_handle<> waiter = cancel_pending()) {
        // Run the coroutine to its end here, while the exchange still exists: each later await
        // fails at once (begin() sees cancelled_), so it cannot wait any more. Nothing it writes
        // from here on may go out (docs/api.md), yet the connection still sends the response
        // after this event: the unsent part of a stream whose head is out goes with the cut,
        // and a stop or a timeout answers from it. So the coroutine runs on a response of its
        // own, dropped after; moves, so nothing here can fail for want of memory.
        response& res = *response_; // the exchange's: this event runs within its life
        response kept = std::move(res);
        res = response();
        step(waiter);
        res = std::move(kept);
    }
}

void coro_run::on_complete() noexcept {
    cancelled_ = true;
    // Still suspended: someone else completed the exchange, or the coroutine waits on an
    // awaitable that is not cancellable. Its frame must not outlive the exchange.
    (void)cancel_pending();
    if (frame_) {
        std::exchange(frame_, {}).destroy();
    }
    release(); // the listeners'
}

void coroutine_finished(coro_run* run, std::exception_ptr error) noexcept {
    if (run != nullptr) {
        run->finished(std::move(error));
    }
}

bool op_begin(coro_run* run, op_base* op, std::coroutine_handle<> waiter) {
    if (run == nullptr) {
        throw std::logic_error("sluice: an async_op can only be awaited inside a coroutine handler");
    }
    return run->begin(op, waiter);
}

void op_abandon(coro_run* run, op_base* op) noexcept {
    run->abandon(op);
}

} // namespace sluice::detail
