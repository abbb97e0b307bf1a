// A few threads that run tasks at a chosen time: the "other threads" of the async torture test
// (complete, resume, set_timeout... after a random delay) without a thread per call, which
// would cost too much under TSan.
//
//   delay_pool pool(4);
//   pool.run_after(2, std::chrono::microseconds(500), [ctx]() mutable { ctx.complete(); });
//   pool.wait_idle(5s);
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "support/deadline.h"

namespace sluice::test {

class delay_pool {
public:
    explicit delay_pool(std::size_t threads);
    ~delay_pool(); ///< runs what is queued, then joins
    delay_pool(const delay_pool&) = delete;
    delay_pool& operator=(const delay_pool&) = delete;

    std::size_t size() const noexcept { return lanes_.size(); }
    /// Runs fn on thread `lane % size()` once `delay` has passed (tasks of one lane run in
    /// order of their due time). Thread-safe.
    void run_after(std::size_t lane, std::chrono::microseconds delay, std::function<void()> fn);
    /// Waits until every queued task has run; false after timeout.
    bool wait_idle(std::chrono::milliseconds timeout = default_timeout);

private:
    struct task {
        test_clock::time_point due;
        std::uint64_t order; // FIFO among equal due times
        std::function<void()> fn;
        bool operator>(const task& o) const noexcept { return due != o.due ? due > o.due : order > o.order; }
    };
    struct lane {
        std::mutex mu;
        std::condition_variable cv;
        std::priority_queue<task, std::vector<task>, std::greater<>> queue;
        std::size_t running = 0;
        bool stopping = false;
        std::thread thread;
    };

    void loop(lane& l);

    std::vector<std::unique_ptr<lane>> lanes_;
    std::uint64_t next_order_ = 0;
    std::mutex order_mu_;
};

} // namespace sluice::test
