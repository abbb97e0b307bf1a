// The thread-safe door into a loop: a mailbox of tasks plus a wake-up.
//
// Executors and async contexts hold a shared_ptr to the port, never to the loop, so
// they may outlive it. The loop closes its port when it stops for good (the end of
// loop::run() after stop()) or is destroyed: post() then returns false and the task is
// dropped (destroyed on the caller's thread).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <sluice/backend.h>

namespace sluice::detail {

class loop;

class loop_port {
public:
    using task = std::function<void()>;

    loop_port(loop& l, io::driver& d) noexcept : loop_(&l), driver_(&d) {}

    /// Queues a task for the loop thread; wakes the loop if the mailbox was empty and the
    /// caller is another thread.
    bool post(task t);
    /// Moves every queued task into out (the loop thread's swap buffer).
    void drain(std::vector<task>& out);
    /// Whether tasks are waiting (racy hint for the loop's wait timeout).
    bool has_tasks() const noexcept;
    /// After close(), post() refuses. Tasks still queued are returned for the loop to drop.
    void close(std::vector<task>& leftovers);

    /// Whether the caller runs the loop. False once the port is closed (the loop may be gone).
    bool in_owner_thread() const noexcept {
        return owner_thread_.load(std::memory_order_acquire) == std::this_thread::get_id();
    }
    /// The loop's thread starts or stops running it.
    void set_owner_thread(std::thread::id id) noexcept { owner_thread_.store(id, std::memory_order_release); }
    /// Whether the loop serves one connection and then ends (the blocking backend): long-lived
    /// work such as an upstream client's pool must not live there. Set before the loop runs
    /// its first task; readable from any thread.
    bool serves_one_connection() const noexcept { return one_connection_.load(std::memory_order_acquire); }
    void set_serves_one_connection(bool v) noexcept { one_connection_.store(v, std::memory_order_release); }
    /// The loop itself; only for tasks, which run on the loop's thread while it lives.
    detail::loop& owner_loop() const noexcept { return *loop_; }

private:
    mutable std::mutex mu_;
    std::vector<task> tasks_;
    std::atomic<bool> nonempty_{false}; // lets the loop skip the lock when nothing was posted
    std::atomic<std::thread::id> owner_thread_{};
    std::atomic<bool> one_connection_{false};
    detail::loop* loop_;
    io::driver* driver_; // null once closed
};

} // namespace sluice::detail
