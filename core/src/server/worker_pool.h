// The handler pool for dispatch = pool: the Servlet container model, where a sync
// handler may block its worker without stalling an I/O loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::detail {

struct server_context;

class worker_pool {
public:
    /// `owner`: the server whose threads these are (server_thread.h).
    worker_pool(std::uint32_t threads, const server_context* owner);
    ~worker_pool();
    worker_pool(const worker_pool&) = delete;
    worker_pool& operator=(const worker_pool&) = delete;

    /// Queues a task; false once stop() was called.
    bool submit(std::function<void()> task);
    /// Lets queued tasks finish, then joins the threads.
    void stop();

private:
    void run();

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> tasks_;
    std::vector<std::thread> threads_;
    bool stopping_ = false;
};

} // namespace sluice::detail
