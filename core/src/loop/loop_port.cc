#include "loop/loop_port.h"

#include <sluice/executor.h>

#include "loop/loop.h"

namespace sluice::detail {

bool loop_port::post(task t) {
    io::driver* wake = nullptr;
    // From the loop's own thread (a loop timer or an upstream callback completing an exchange)
    // no wake-up is needed: the loop is not waiting now, and it looks at the mailbox before it
    // waits again (loop::wait_timeout). Skipping it saves an eventfd write here and a wake-up
    // the next wait would have to consume.
    const bool from_loop = in_owner_thread();
    {
        std::lock_guard lock(mu_);
        if (driver_ == nullptr) {
            return false;
        }
        if (tasks_.empty() && !from_loop) {
            wake = driver_;
        }
        tasks_.push_back(std::move(t));
        nonempty_.store(true, std::memory_order_release);
        // Wake under the lock: close() takes it too, so the driver cannot be destroyed
        // between our check and the wake-up.
        if (wake != nullptr) {
            wake->wake();
        }
    }
    return true;
}

void loop_port::drain(std::vector<task>& out) {
    if (!nonempty_.load(std::memory_order_acquire)) {
        return;
    }
    std::lock_guard lock(mu_);
    out.swap(tasks_);
    nonempty_.store(false, std::memory_order_relaxed);
}

bool loop_port::has_tasks() const noexcept {
    return nonempty_.load(std::memory_order_acquire);
}

void loop_port::close(std::vector<task>& leftovers) {
    std::lock_guard lock(mu_);
    driver_ = nullptr;
    owner_thread_.store(std::thread::id(), std::memory_order_release);
    leftovers.swap(tasks_);
    nonempty_.store(false, std::memory_order_relaxed);
}

} // namespace sluice::detail

namespace sluice {

bool executor::post(std::function<void()> fn) const {
    return port_ != nullptr && port_->post(std::move(fn));
}

bool executor::post_after(std::chrono::milliseconds delay, std::function<void()> fn) const {
    if (port_ == nullptr) {
        return false;
    }
    // Arming a timer touches the loop's heap, so it always happens on the loop thread.
    return port_->post([port = port_.get(), delay, fn = std::move(fn)]() mutable {
        port->owner_loop().call_after(delay, std::move(fn));
    });
}

bool executor::in_loop_thread() const noexcept {
    return port_ != nullptr && port_->in_owner_thread();
}

} // namespace sluice
