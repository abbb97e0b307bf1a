// A handle to one I/O loop: run a function there now or after a delay.
//
// Handles are cheap to copy and safe to outlive the loop: once the loop has stopped,
// post() and post_after() do nothing and return false.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

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
    /// Whether the caller runs on this loop's thread.
    bool in_loop_thread() const noexcept;
    explicit operator bool() const noexcept { return port_ != nullptr; }

private:
    friend class detail::exchange_access;
    std::shared_ptr<detail::loop_port> port_;
};

} // namespace sluice
