// sluice::async_op<T>: co_await any callback-style asynchronous operation.
//
// An operation is a start function that receives a sluice::completion<T> and calls it once,
// from any thread, with the outcome:
//
//   sluice::async_op<std::string> lookup(db& d, std::string key) {
//       return sluice::async_op<std::string>([&d, key](sluice::completion<std::string> done) {
//           d.get(key, done);   // done(std::error_code, std::string) on some thread
//       });
//   }
//   ...
//   sluice::result<std::string> r = co_await lookup(d, "k");
//
// The guarantees, whatever thread calls the completion:
// - The coroutine resumes on its exchange's loop thread, never inside the completion call.
// - The first call of the completion wins; later calls are ignored. A completion whose last
//   copy is destroyed without being called settles the await with
//   std::future_errc::broken_promise (a dropped callback never leaves a coroutine hanging).
// - When the exchange ends while the await is pending (the client left, the async timeout
//   fired, the server stops), the await completes at once with std::errc::operation_canceled
//   and the canceller registered with completion::on_cancel runs, on the loop thread; the
//   operation's own completion, if it still comes, is ignored. Once the exchange has ended,
//   every later await completes at once with operation_canceled, without starting anything.
//
// co_await gives a sluice::result<T>, or a std::error_code for async_op<void>.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

#include <sluice/result.h>
#include <sluice/task.h>

namespace sluice {

namespace detail {

/// The shared state of one await, settled exactly once: by the operation (any thread), by
/// the loss of every completion handle, or by cancellation (the loop thread).
class op_base {
public:
    op_base(const op_base&) = delete;
    op_base& operator=(const op_base&) = delete;

    void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete this;
        }
    }

    /// Stores the outcome unless one was stored; true when this call stored it.
    template <class Store>
    bool settle(Store&& store) noexcept {
        std::lock_guard lock(mu_);
        if (settled_) {
            return false;
        }
        store();
        settled_ = true;
        return true;
    }
    /// A completion settled the await: resume the coroutine on its loop. Any thread.
    void wake() noexcept;
    /// Settles with error (unless settled) and resumes the coroutine on its loop. Any thread.
    void fail_and_wake(std::error_code error) noexcept;
    /// Settles as cancelled and runs the canceller; false when the await had settled already.
    /// The runner's loop thread.
    bool cancel(std::error_code error) noexcept;
    /// Registers what cancel() runs; runs it at once when the await was cancelled already.
    void set_canceller(std::function<void()> fn);
    /// The await has settled and its coroutine resumes: the canceller can never run, and goes.
    /// Kept, one that holds the operation's job, which holds a completion, would keep the op
    /// and its runner for good. The runner's loop thread, never inside a completion's call.
    void drop_canceller() noexcept;

    void add_completion() noexcept { completions_.fetch_add(1, std::memory_order_relaxed); }
    void drop_completion() noexcept;

    coro_run* run() const noexcept { return run_; }
    std::coroutine_handle<> waiter() const noexcept { return waiter_; }
    /// The runner adopts the await (op_begin): it may now resume `waiter`.
    void bind(coro_run* run, std::coroutine_handle<> waiter) noexcept;

protected:
    op_base() = default;
    virtual ~op_base();
    virtual void store_error(std::error_code error) noexcept = 0;

private:
    std::mutex mu_;
    bool settled_ = false;
    bool cancelled_ = false;
    std::function<void()> canceller_;
    std::atomic<std::uint32_t> refs_{1};
    std::atomic<std::uint32_t> completions_{0};
    coro_run* run_ = nullptr; // holds a reference once bound
    std::coroutine_handle<> waiter_;
};

/// The runner of `run` waits for op (which it retains) and will resume `waiter` with it.
/// False when the exchange has ended: op is settled with operation_canceled, do not suspend.
/// Throws std::logic_error when run is null (awaited outside a coroutine handler).
bool op_begin(coro_run* run, op_base* op, std::coroutine_handle<> waiter);
/// The start function threw: the runner stops waiting for op.
void op_abandon(coro_run* run, op_base* op) noexcept;

template <class T>
class op_state final : public op_base {
public:
    std::optional<result<T>> outcome;

private:
    void store_error(std::error_code error) noexcept override { outcome.emplace(error); }
};

template <>
class op_state<void> final : public op_base {
public:
    std::error_code outcome;

private:
    void store_error(std::error_code error) noexcept override { outcome = error; }
};

/// Shared handling of the completion handles of both kinds.
class completion_base {
public:
    completion_base(const completion_base& other) noexcept : op_(other.op_) {
        if (op_ != nullptr) {
            op_->retain();
            op_->add_completion();
        }
    }
    completion_base(completion_base&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
    completion_base& operator=(completion_base other) noexcept {
        std::swap(op_, other.op_);
        return *this;
    }
    ~completion_base() {
        if (op_ != nullptr) {
            op_->drop_completion();
            op_->release();
        }
    }

protected:
    explicit completion_base(op_base* op) noexcept : op_(op) {
        op_->retain();
        op_->add_completion();
    }
    op_base* op_;
};

} // namespace detail

/// The callback handed to an operation's start function. Cheap to copy; callable from any
/// thread; the first call wins.
template <class T>
class completion : public detail::completion_base {
public:
    explicit completion(detail::op_state<T>* op) noexcept : completion_base(op) {}

    void operator()(result<T> r) const noexcept {
        if (op_ != nullptr && op_->settle([&] { state()->outcome.emplace(std::move(r)); })) {
            op_->wake();
        }
    }
    void operator()(std::error_code error, T value) const noexcept {
        if (error) {
            (*this)(result<T>(error));
        } else {
            (*this)(result<T>(std::move(value)));
        }
    }
    void operator()(std::error_code error) const noexcept { (*this)(result<T>(error)); }

    /// What to do when the exchange ends before the operation does (stop it, free resources).
    /// Runs once, on the exchange's loop thread; if the await was cancelled already, at once when
    /// called there, else posted there.
    void on_cancel(std::function<void()> fn) const {
        if (op_ != nullptr) {
            op_->set_canceller(std::move(fn));
        }
    }

private:
    detail::op_state<T>* state() const noexcept { return static_cast<detail::op_state<T>*>(op_); }
};

template <>
class completion<void> : public detail::completion_base {
public:
    explicit completion(detail::op_state<void>* op) noexcept : completion_base(op) {}

    /// Success with no argument, failure with an error.
    void operator()(std::error_code error = {}) const noexcept {
        if (op_ != nullptr && op_->settle([&] { state()->outcome = error; })) {
            op_->wake();
        }
    }
    void on_cancel(std::function<void()> fn) const {
        if (op_ != nullptr) {
            op_->set_canceller(std::move(fn));
        }
    }

private:
    detail::op_state<void>* state() const noexcept { return static_cast<detail::op_state<void>*>(op_); }
};

/// An awaitable operation: started when awaited, by calling `start` with a completion.
template <class T>
class async_op {
public:
    using start_function = std::function<void(completion<T>)>;

    explicit async_op(start_function start) : start_(std::move(start)) {}
    async_op(async_op&& other) noexcept
        : start_(std::move(other.start_)), op_(std::exchange(other.op_, nullptr)) {}
    async_op& operator=(async_op&&) = delete;
    async_op(const async_op&) = delete;
    async_op& operator=(const async_op&) = delete;
    ~async_op() { drop(); }

    bool await_ready() const noexcept { return false; }

    template <detail::sluice_promise Promise>
    bool await_suspend(std::coroutine_handle<Promise> h) {
        drop();
        op_ = new detail::op_state<T>();
        detail::coro_run* run = h.promise().sluice_run();
        if (!detail::op_begin(run, op_, h)) {
            return false; // the exchange has ended: resume at once with operation_canceled
        }
        try {
            start_(completion<T>(op_));
        } catch (...) {
            detail::op_abandon(run, op_);
            throw; // rethrown at the co_await
        }
        // From here the coroutine may be resumed (on the loop) at any time: touch nothing.
        return true;
    }

    auto await_resume() {
        if constexpr (std::is_void_v<T>) {
            return op_->outcome;
        } else {
            return std::move(*op_->outcome);
        }
    }

private:
    void drop() noexcept {
        if (op_ != nullptr) {
            std::exchange(op_, nullptr)->release();
        }
    }

    start_function start_;
    detail::op_state<T>* op_ = nullptr;
};

} // namespace sluice
