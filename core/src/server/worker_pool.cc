#include "server/worker_pool.h"

#include "server/server_thread.h"

namespace sluice::detail {

worker_pool::worker_pool(std::uint32_t threads, const server_context* owner) {
    threads_.reserve(threads);
    for (std::uint32_t i = 0; i < threads; ++i) {
        threads_.emplace_back([this, owner] {
            const server_thread_mark mark(owner);
            run();
        });
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
