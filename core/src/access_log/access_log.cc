#include "access_log/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sluice/error.h>

namespace sluice::detail {

namespace {
// How often the writer looks at the queues: a loop never wakes it (a wake per request would
// cost a syscall on the request path), so a queue must hold this long's worth of lines.
constexpr auto sweep_period = std::chrono::milliseconds(10);
constexpr auto report_period = std::chrono::seconds(10);
constexpr std::size_t min_queue_lines = 64;
} // namespace

access_log::access_log(const access_log_config& cfg, std::size_t loops, const logger& log)
    : path_(cfg.path), format_(cfg.format == "json" ? access_log_format::json : access_log_format::combined),
      log_(log) {
    open_path(true);
    loops = std::max<std::size_t>(loops, 1);
    const std::size_t per_loop = std::max(min_queue_lines, cfg.queue_lines / loops);
    queues_.reserve(loops);
    for (std::size_t i = 0; i < loops; ++i) {
        queues_.push_back(std::make_unique<access_queue>(per_loop));
    }
    thread_ = std::thread([this] { run(); });
}

access_log::~access_log() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (own_fd_ && fd_ >= 0) {
        ::close(fd_);
    }
}

void access_log::open_path(bool at_start) {
    if (path_ == "-") {
        fd_ = STDOUT_FILENO;
        own_fd_ = false;
        return;
    }
    // O_NONBLOCK: a FIFO that nobody reads fails at once (ENXIO) instead of waiting in open()
    // for a reader, at start after SIGTERM is blocked, on SIGUSR1 holding the writer (and the
    // stop, which joins it). One with a reader is written to as stdout's pipe is: the writes
    // block as before, the flag is cleared once open.
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        const int err = errno;
        if (at_start) {
            throw startup_error("access_log.path", "cannot open '" + path_ + "': " + std::strerror(err) +
                                                       (err == ENXIO ? " (a FIFO with no reader?)" : ""));
        }
        // logrotate's "create" may have failed: keep writing to the old file rather than lose lines.
        report("cannot reopen", err);
        return;
    }
    if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) {
        ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    }
    if (own_fd_ && fd_ >= 0) {
        ::close(fd_);
    }
    fd_ = fd;
    own_fd_ = true;
}

void access_log::report(std::string_view what, int err) {
    const auto now = std::chrono::steady_clock::now();
    if (reported_at_ == std::chrono::steady_clock::time_point{} || now - reported_at_ >= report_period) {
        reported_at_ = now;
        log_.error("access log {} '{}': {} ({} lines lost so far)", what, path_, std::strerror(err),
                   errors_.load(std::memory_order_relaxed));
    }
}

void access_log::reopen() noexcept {
    reopen_wanted_.store(true, std::memory_order_relaxed);
    cv_.notify_all();
}

void access_log::flush() {
    std::unique_lock lock(mu_);
    const std::uint64_t ticket = ++flush_wanted_;
    cv_.notify_all();
    flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket || stop_; });
}

access_log_figures access_log::figures() const noexcept {
    access_log_figures f;
    f.written = written_.load(std::memory_order_relaxed);
    f.write_errors = errors_.load(std::memory_order_relaxed);
    for (const auto& q : queues_) {
        f.dropped += q->dropped();
    }
    return f;
}

void access_log::write_out(std::string& batch, std::size_t lines) {
    if (lines == 0) {
        return;
    }
    std::size_t off = 0;
    int err = 0;
    while (off < batch.size()) {
        const ssize_t n = fd_ >= 0 ? ::write(fd_, batch.data() + off, batch.size() - off) : -1;
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            err = fd_ >= 0 ? (n == 0 ? EIO : errno) : EBADF;
            break;
        }
        off += static_cast<std::size_t>(n);
    }
    if (err != 0) {
        // A partial write loses the rest of the batch: count it as whole lines lost.
        errors_.fetch_add(lines, std::memory_order_relaxed);
        report("cannot write", err);
    } else {
        written_.fetch_add(lines, std::memory_order_relaxed);
    }
    batch.clear();
}

void access_log::run() {
    std::string batch;
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait_for(lock, sweep_period, [this] {
            return stop_ || flush_wanted_ > flush_done_ || reopen_wanted_.load(std::memory_order_relaxed);
        });
        const bool stopping = stop_;
        const std::uint64_t flush_ticket = flush_wanted_;
        lock.unlock();
        if (reopen_wanted_.exchange(false, std::memory_order_relaxed)) {
            open_path(false);
        }
        std::size_t lines = 0;
        for (const auto& q : queues_) {
            lines += q->drain([&](const std::string& line) noexcept {
                try {
                    batch += line;
                } catch (const std::bad_alloc&) {
                    errors_.fetch_add(1, std::memory_order_relaxed);
                }
            });
        }
        write_out(batch, lines);
        lock.lock();
        flush_done_ = flush_ticket;
        flushed_cv_.notify_all();
        if (stopping) {
            return;
        }
    }
}

} // namespace sluice::detail
