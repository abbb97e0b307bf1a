#include "server/worker_pool.h"

#include "server/server_thread.h"
#include "server/thread_start.h"

namespace sluice::detail {

worker_pool::worker_pool(std::uint32_t threads, const server_context* owner) {
    threads_.reserve(threads);
    for (std::uint32_t i = 0; i < threads; ++i) {
        try {
            threads_.push_back(start_thread(owner, [this, owner] {
                const server_thread_mark mark(owner);
                run();
            }));
        } catch (const std::exception& e) {
            // No destructor runs for a constructor that throws: the threads already started
            // are stopped and joined here (a joinable std::thread destroyed is std::terminate).
            stop();
            throw thread_start_failed("worker_threads", i, threads, e);
        }
    }
}

worker_pool::~worker_pool() {
    stop();
}

bool worker_pool::submit(std::function<void()> task) {
    {
        std::lock_guard lock(mu_);
        if (stopping_) {
            return false;
        }
        tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
}

void worker_pool::stop() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
        if (t.joinable()) {
            t.join();
        }
    }
    threads_.clear();
}

void worker_pool::run() {
    for (;;) {
        std::function<void()> task;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
            if (tasks_.empty()) {
                return; // stopping, and nothing left to run
            }
            task = std::move(tasks_.front());
            tasks_.pop_front();
        }
        task();
    }
}

} // namespace sluice::detail
