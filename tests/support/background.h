// Threads a test starts (to complete exchanges "from another thread"), joined before the
// test's server and locals go away, so no thread outlives what it captured.
#pragma once

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice::test {

class background {
public:
    background() = default;
    ~background() { join(); }
    background(const background&) = delete;
    background& operator=(const background&) = delete;

    /// Runs fn on a new thread. Thread-safe (handlers call it from I/O and worker threads).
    void run(std::function<void()> fn);
    /// Joins every thread started so far (and any they start meanwhile).
    void join();

private:
    std::mutex mu_;
    std::vector<std::thread> threads_;
};

} // namespace sluice::test
