// The access log: lines formatted on the loops, queued per loop (access_queue.h, never
// blocking a loop), written by one thread of its own to a file or stdout. reopen() (SIGUSR1,
// for logrotate) makes the writer open the path again; a path that cannot be opened or
// written at run time costs the lines (counted, logged at most every 10 s), never the serving.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sluice/config.h>
#include <sluice/log.h>

#include "access_log/access_format.h"
#include "access_log/access_queue.h"
#include "metrics/snapshot.h"

namespace sluice::detail {

class access_log {
public:
    /// Opens the path (throws startup_error naming access_log.path when it cannot) and starts
    /// the writer. `loops` queues of about access_log.queue_lines / loops lines each.
    access_log(const access_log_config& cfg, std::size_t loops, const logger& log);
    /// Writes what is queued, then stops the writer.
    ~access_log();
    access_log(const access_log&) = delete;
    access_log& operator=(const access_log&) = delete;

    access_log_format format() const noexcept { return format_; }
    /// The queue of loop `index`; nullptr past the count given (that loop does not log).
    access_queue* queue(std::size_t index) noexcept {
        return index < queues_.size() ? queues_[index].get() : nullptr;
    }
    /// Asks the writer to open the path again (thread-safe, async-signal-safe in effect: one store).
    void reopen() noexcept;
    /// Wakes the writer and waits until it has written what was queued before (for tests).
    void flush();
    access_log_figures figures() const noexcept;

private:
    void run();
    void write_out(std::string& batch, std::size_t lines);
    void open_path(bool at_start);
    void report(std::string_view what, int err);

    std::string path_;
    access_log_format format_;
    const logger& log_;
    std::vector<std::unique_ptr<access_queue>> queues_;
    int fd_ = -1;
    bool own_fd_ = false;
    std::atomic<bool> reopen_wanted_{false};
    std::atomic<std::uint64_t> written_{0};
    std::atomic<std::uint64_t> errors_{0};
    std::chrono::steady_clock::time_point reported_at_{};
    std::mutex mu_;
    std::condition_variable cv_;
    std::condition_variable flushed_cv_;
    std::uint64_t flush_wanted_ = 0; // under mu_
    std::uint64_t flush_done_ = 0;   // under mu_
    bool stop_ = false;
    std::thread thread_;
};

} // namespace sluice::detail
