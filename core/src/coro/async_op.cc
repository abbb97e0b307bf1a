// The shared state of one await (async_op.h): settled once, then resumed on the loop.
#include <future>
#include <new>

#include <sluice/async_op.h>

#include "coro/coro_run.h"

namespace sluice::detail {

namespace {

/// Keeps an op alive inside a posted task, whether the task runs or is dropped unrun.
class op_hold {
public:
    explicit op_hold(op_base* op) noexcept : op_(op) { op_->retain(); }
    op_hold(const op_hold& other) noexcept : op_(other.op_) { op_->retain(); }
    op_hold& operator=(const op_hold&) = delete;
    ~op_hold() { op_->release(); }
    op_base* get() const noexcept { return op_; }

private:
    op_base* op_;
};

} // namespace

op_base::~op_base() {
    if (run_ != nullptr) {
        run_->release();
    }
}

void op_base::bind(coro_run* run, std::coroutine_handle<> waiter) noexcept {
    // Before the start function runs, so before any completion can read run_.
    run_ = run;
    waiter_ = waiter;
}

void op_base::wake() noexcept {
    if (run_ == nullptr) {
        return;
    }
    // Always through the loop's mailbox, never inline: the coroutine must not run inside the
    // operation's callback (on a foreign thread, or deep in some other component's stack).
    try {
        run_->loop().post([hold = op_hold(this)] { hold.get()->run()->resume_from(hold.get()); });
    } catch (...) {
        // Out of memory posting: the await stays pending until the exchange ends (timeout or
        // disconnect cancel it).
    }
}

void op_base::fail_and_wake(std::error_code error) noexcept {
    if (settle([&] { store_error(error); })) {
        wake();
    }
}

bool op_base::cancel(std::error_code error) noexcept {
    std::function<void()> canceller;
    {
        std::lock_guard lock(mu_);
        if (settled_) {
            canceller = std::move(canceller_); // completed first: dropped, outside the lock
            return false;
        }
        store_error(error);
        settled_ = true;
        cancelled_ = true;
        canceller = std::move(canceller_);
    }
    if (canceller) {
        try {
            canceller();
        } catch (...) {
            // A canceller that throws has nowhere to report to; the await is cancelled anyway.
        }
    }
    return true;
}

void op_base::set_canceller(std::function<void()> fn) {
    {
        std::lock_guard lock(mu_);
        if (!settled_) {
            canceller_ = std::move(fn);
            return;
        }
        if (!cancelled_) {
            return; // completed already: nothing to cancel
        }
    }
    if (!fn) {
        return;
    }
    // Cancelled before the operation could say how: stop it now, on the loop thread as
    // promised (the operation may be telling us from a thread of its own).
    if (run_ == nullptr || run_->loop().in_loop_thread()) {
        fn();
        return;
    }
    bool posted = false;
    try {
        posted = run_->loop().post([fn] { fn(); });
    } catch (const std::bad_alloc&) {
    }
    if (!posted) {
        fn(); // the loop has stopped (or no memory to post): stopping the operation here beats never
    }
}

void op_base::drop_canceller() noexcept {
    std::function<void()> canceller; // goes after the lock: its captures may hold a completion
    {
        std::lock_guard lock(mu_);
        canceller.swap(canceller_);
    }
}

void op_base::drop_completion() noexcept {
    if (completions_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // The last handle is gone without a call: the operation can never complete.
        fail_and_wake(std::make_error_code(std::future_errc::broken_promise));
    }
}

} // namespace sluice::detail
