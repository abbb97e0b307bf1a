// sluice::task<T>: the coroutine type of handlers and of the functions they call.
//
//   sluice::task<> handle(sluice::exchange& ex) {          // a handler (see coro.h)
//       int n = co_await count_rows(ex);                     // a task<int>, awaited
//       if (auto ec = co_await sluice::sleep_for(ex, 3s)) {  // an asynchronous operation
//           co_return;                                       // cancelled: the exchange is ending
//       }
//       ex.response().text(std::to_string(n));
//   }
//
// A task is lazy: its body starts when it is awaited (or, for a handler's own task, when
// the server launches it), and the awaiting coroutine continues when it returns. A task owns
// its frame: destroying a task that has not finished destroys the frame. Tasks can only be
// awaited from sluice coroutines, because every coroutine of one handler shares the
// handler's runner: the object that resumes them on the exchange's loop and cancels their
// pending operation when the exchange ends (docs/api.md, "Coroutine handlers").
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace sluice {

template <class T = void>
class task;

namespace detail {

class coro_run;

/// The handler's own coroutine reached its final suspend point (called from inside it).
void coroutine_finished(coro_run* run, std::exception_ptr error) noexcept;

/// What every sluice promise has: the runner, the awaiting coroutine, an escaped exception.
class promise_base {
public:
    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <class Promise>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
            promise_base& p = self.promise();
            if (p.continuation_) {
                return p.continuation_; // a nested task: the awaiting coroutine goes on (symmetric transfer)
            }
            // The handler's own task. The runner only takes note here: it destroys the frame after
            // the resume() that brought us here returns, never from inside the frame itself.
            coroutine_finished(p.run_, p.error_);
            return std::noop_coroutine();
        }
        void await_resume() noexcept {}
    };

    std::suspend_always initial_suspend() noexcept { return {}; }
    final_awaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { error_ = std::current_exception(); }

    /// The runner of the handler this coroutine belongs to (null outside a coroutine handler).
    coro_run* sluice_run() const noexcept { return run_; }
    void sluice_bind(coro_run* run, std::coroutine_handle<> continuation) noexcept {
        run_ = run;
        continuation_ = continuation;
    }

protected:
    void rethrow_if_failed() const {
        if (error_) {
            std::rethrow_exception(error_);
        }
    }

private:
    coro_run* run_ = nullptr;
    std::coroutine_handle<> continuation_;
    std::exception_ptr error_;
};

template <class T>
class task_promise : public promise_base {
public:
    task<T> get_return_object() noexcept;
    template <class U>
    requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) { value_.emplace(std::forward<U>(v)); }
    T take() {
        rethrow_if_failed();
        return std::move(*value_);
    }

private:
    std::optional<T> value_;
};

template <>
class task_promise<void> : public promise_base {
public:
    task<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() const { rethrow_if_failed(); }
};

/// Awaiting a sluice awaitable needs the runner of the awaiting coroutine.
template <class Promise>
concept sluice_promise = requires(const Promise& p) {
    { p.sluice_run() } -> std::same_as<coro_run*>;
};

} // namespace detail

template <class T>
class [[nodiscard]] task {
public:
    using promise_type = detail::task_promise<T>;
    using handle_type = std::coroutine_handle<promise_type>;

    task() noexcept = default;
    explicit task(handle_type h) noexcept : h_(h) {}
    task(task&& other) noexcept : h_(std::exchange(other.h_, {})) {}
    task& operator=(task&& other) noexcept {
        if (this != &other) {
            reset();
            h_ = std::exchange(other.h_, {});
        }
        return *this;
    }
    task(const task&) = delete;
    task& operator=(const task&) = delete;
    ~task() { reset(); }

    explicit operator bool() const noexcept { return static_cast<bool>(h_); }

    class awaiter {
    public:
        explicit awaiter(handle_type h) noexcept : h_(h) {}
        bool await_ready() const noexcept { return false; }
        template <detail::sluice_promise Promise>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> parent) noexcept {
            // The child shares the parent's runner, so its awaits are cancelled with the exchange.
            h_.promise().sluice_bind(parent.promise().sluice_run(), parent);
            return h_;
        }
        T await_resume() { return h_.promise().take(); }

    private:
        handle_type h_;
    };

    /// Runs the task to its end and gives its value (or rethrows its exception).
    awaiter operator co_await() const& noexcept { return awaiter(h_); }
    awaiter operator co_await() const&& noexcept { return awaiter(h_); }

    /// For the runtime: takes the frame out of the task.
    handle_type release() noexcept { return std::exchange(h_, {}); }

private:
    void reset() noexcept {
        if (h_) {
            std::exchange(h_, {}).destroy();
        }
    }

    handle_type h_;
};

namespace detail {

template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
    return task<T>(std::coroutine_handle<task_promise<T>>::from_promise(*this));
}

inline task<void> task_promise<void>::get_return_object() noexcept {
    return task<void>(std::coroutine_handle<task_promise<void>>::from_promise(*this));
}

} // namespace detail

} // namespace sluice
