#include "support/delay_pool.h"

namespace sluice::test {

delay_pool::delay_pool(std::size_t threads) {
    for (std::size_t i = 0; i < threads; ++i) {
        lanes_.push_back(std::make_unique<lane>());
    }
    for (auto& l : lanes_) {
        l->thread = std::thread([this, p = l.get()] { loop(*p); });
    }
}

delay_pool::~delay_pool() {
    for (auto& l : lanes_) {
        {
            std::lock_guard lock(l->mu);
            l->stopping = true;
        }
        l->cv.notify_all();
    }
    for (auto& l : lanes_) {
        l->thread.join();
    }
}

void delay_pool::run_after(std::size_t lane_index, std::chrono::microseconds delay,
                           std::function<void()> fn) {
    std::uint64_t order = 0;
    {
        std::lock_guard lock(order_mu_);
        order = next_order_++;
    }
    lane& l = *lanes_[lane_index % lanes_.size()];
    {
        std::lock_guard lock(l.mu);
        l.queue.push(task{test_clock::now() + delay, order, std::move(fn)});
    }
    l.cv.notify_all();
}

bool delay_pool::wait_idle(std::chrono::milliseconds timeout) {
    const auto deadline = test_clock::now() + timeout;
    for (auto& l : lanes_) {
        std::unique_lock lock(l->mu);
        if (!l->cv.wait_until(lock, deadline, [&] { return l->queue.empty() && l->running == 0; })) {
            return false;
        }
    }
    return true;
}

void delay_pool::loop(lane& l) {
    std::unique_lock lock(l.mu);
    while (true) {
        if (l.queue.empty()) {
            if (l.stopping) {
                return;
            }
            l.cv.wait(lock);
            continue;
        }
        // The queue's top is the earliest task; a stopping pool still runs it, at once.
        // A copy: wait_until reads the time point while the lock is released, and a push may
        // move the queue's elements meanwhile.
        const test_clock::time_point due = l.queue.top().due;
        if (!l.stopping && test_clock::now() < due) {
            l.cv.wait_until(lock, due);
            continue;
        }
        std::function<void()> fn = std::move(const_cast<task&>(l.queue.top()).fn);
        l.queue.pop();
        ++l.running;
        lock.unlock();
        fn();
        fn = nullptr; // captured handles are dropped on this thread, before we report idle
        lock.lock();
        --l.running;
        l.cv.notify_all();
    }
}

} // namespace sluice::test
