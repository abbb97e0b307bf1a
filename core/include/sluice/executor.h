// A handle to one I/O loop: run a function there now or after a delay.
//
// Handles are cheap to copy and safe to outlive the loop and the server. What happens to a
// function handed over:
//  - post() / post_after() return true: the function was accepted. An accepted post() runs
//    on the loop's thread, also when the server stops before the loop gets to it (the loop
//    runs every accepted task before its thread ends). An accepted post_after() runs once
//    its delay has passed, unless the loop stops first: then it is destroyed, unrun, on the
//    loop's thread as the loop ends.
//  - They return false once the loop has stopped (server::stop() ended it; the server need
//    not be destroyed yet): the function is destroyed, unrun, before the call returns.
// Either way nothing captured by a function outlives the loop's end. What a function throws
// is logged (level error) and the loop goes on with its next work.
// On the blocking backend a loop serves one connection at a time; a task posted to it after
// that connection closed runs at once all the same (its thread waits in the loop).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include <sluice/duration.h>

namespace sluice {

namespace detail {
class loop_port;
class exchange_access;
} // namespace detail

class executor {
public:
    executor() noexcept = default;
    explicit executor(std::shared_ptr<detail::loop_port> port) noexcept : port_(std::move(port)) {}

    /// Runs fn on the loop's thread, in order with other posts. Thread-safe.
    bool post(std::function<void()> fn) const;
    /// Runs fn on the loop's thread once delay has passed (a loop timer; no thread sleeps).
    /// Thread-safe.
    bool post_after(std::chrono::milliseconds delay, std::function<void()> fn) const;
    /// Any duration, rounded up to whole milliseconds; one too long for them saturates to
    /// milliseconds::max() (never runs while the loop lives) instead of wrapping (duration.h).
    template <class Rep, class Period>
    bool post_after(std::chrono::duration<Rep, Period> delay, std::function<void()> fn) const {
        return post_after(detail::saturating_ceil_ms(delay), std::move(fn));
    }
    /// Whether the caller runs on this loop's thread.
    bool in_loop_thread() const noexcept;
    explicit operator bool() const noexcept { return port_ != nullptr; }

private:
    friend class detail::exchange_access;
    std::shared_ptr<detail::loop_port> port_;
};

} // namespace sluice
