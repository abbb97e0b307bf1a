// Async contexts handed out by handlers, collected for the test thread to complete, resume
// or keep as stale handles. Thread-safe: handlers run on I/O and worker threads.
#pragma once

#include <chrono>
#include <mutex>
#include <vector>

#include <sluice/async_context.h>

#include "support/deadline.h"

namespace sluice::test {

class context_box {
public:
    void add(async_context ctx);
    std::size_t size() const;
    /// Waits until at least n contexts were added.
    bool wait_for(std::size_t n, std::chrono::milliseconds timeout = default_timeout) const;
    /// A copy of the i-th context (an empty one when there is none).
    async_context at(std::size_t i) const;
    /// Every context, leaving the box empty.
    std::vector<async_context> take_all();

private:
    mutable std::mutex mu_;
    std::vector<async_context> items_;
};

} // namespace sluice::test
