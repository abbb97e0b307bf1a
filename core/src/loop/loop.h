// The event loop, written once for every backend (libuv's rule: the phase order is
// fixed in common code).
//
//   for (;;) {
//       wait for completions (until the next timer, or not at all if work is queued)
//       dispatch each completion to its owner, then give its buffer back
//       run the mailbox (tasks posted from other threads)
//       expire due timers
//       run the end-of-iteration hooks (flush corked writes)
//   }
//
// A loop is driven by exactly one thread at a time. The driver only reports; every
// callback runs here, outside wait() (h2o's pending-list rule).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <sluice/backend.h>
#include <sluice/executor.h>
#include <sluice/log.h>

#include "loop/deadline.h"
#include "loop/loop_port.h"
#include "loop/timer_heap.h"

namespace sluice::detail {

class tls_driver;

/// Whatever owns an I/O operation: connections, listeners, client sessions.
class io_handler {
public:
    virtual void on_io(const io::completion& c) noexcept = 0;

protected:
    ~io_handler() = default;
};

/// Runs once at the end of the iteration in which it was scheduled.
class deferred {
public:
    virtual void run_deferred() noexcept = 0;
    bool scheduled_ = false;

protected:
    ~deferred() = default;
};

class loop {
public:
    loop(std::unique_ptr<io::driver> driver, const logger& log, unsigned index);
    ~loop();
    loop(const loop&) = delete;
    loop& operator=(const loop&) = delete;

    io::driver& driver() noexcept { return *driver_; }
    /// The TLS decorator around driver() (tls/tls_driver.h), or null on a loop without one
    /// (a blocking-backend connection loop): https client connections need it.
    tls_driver* tls() const noexcept { return tls_; }
    /// Set once by whoever built the loop, before it runs; `t` is (inside) driver().
    void set_tls(tls_driver* t) noexcept { tls_ = t; }
    const logger& log() const noexcept { return log_; }
    unsigned index() const noexcept { return index_; }
    sluice::executor executor() const noexcept { return sluice::executor(port_); }
    loop_port& port() noexcept { return *port_; }
    const std::shared_ptr<loop_port>& executor_port() const noexcept { return port_; }

    /// Runs iterations until stop() has been called and `live()` is zero (every handler
    /// that registered itself with retain() has released), or, with `until_idle`, as soon
    /// as live() is zero (a blocking-backend loop serving one connection).
    enum class run_mode { until_stopped, until_idle };
    void run(run_mode mode = run_mode::until_stopped);
    /// One iteration that waits for I/O, a post, a wake() or the next timer, then runs what came:
    /// how a blocking-backend connection thread waits between connections, so that work
    /// posted to its loop meanwhile runs.
    void run_once();
    /// Makes a wait in progress, or the next one, return. Thread-safe.
    void wake() noexcept { driver_->wake(); }
    /// Makes run() return once live() reaches zero. Thread-safe.
    void stop();
    /// stop() was called, though the loop may not have acted on it yet (a handler running
    /// inline learns of it here before the loop's next iteration). Thread-safe.
    bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_relaxed); }

    /// Count of objects that keep the loop running (connections, listeners).
    void retain() noexcept { ++live_; }
    void release() noexcept { --live_; }
    std::size_t live() const noexcept { return live_; }
    /// Objects that serve the others (a client pool's connections, for the exchanges of this
    /// loop): they keep the loop running like the rest, but once a stop has begun and only
    /// they are left, the loop runs its on_drained() hooks, which close them.
    void retain_background() noexcept {
        ++live_;
        ++background_;
    }
    void release_background() noexcept {
        --live_;
        --background_;
    }

    /// The time of the current iteration (read once per wait, so deadlines of one batch agree).
    clock::time_point now() const noexcept { return now_; }
    /// Reads the clock now: for work started outside an iteration (a connection thread adopting
    /// a connection after waiting for one), whose deadlines would otherwise start in the past.
    void refresh_clock() noexcept { now_ = clock::now(); }
    void arm(timer& t, clock::time_point when) { timers_.arm(t, when); }
    void arm_after(timer& t, std::chrono::milliseconds d) { timers_.arm(t, deadline_after(now_, d)); }
    void cancel(timer& t) noexcept { timers_.cancel(t); }
    /// A one-shot timer owning its callback (executor::post_after). The timer is the loop's: it
    /// deletes itself when it fires, and the loop deletes it at teardown; until it fires,
    /// cancel_call(the returned timer) withdraws it.
    timer* call_after(std::chrono::milliseconds delay, std::function<void()> fn);
    /// Withdraws a call_after timer that has not fired yet: its callback is destroyed unrun.
    void cancel_call(timer* t) noexcept;

    /// Runs d.run_deferred() at the end of this iteration (once, however often scheduled).
    void defer(deferred& d);

    /// Called by the loop when stop() is first seen, on the loop thread (listeners close,
    /// connections drain).
    void on_stop(std::function<void()> fn) { stop_hooks_.push_back(std::move(fn)); }
    /// Called once, on the loop thread, when a stop has begun and only background objects keep
    /// the loop (the server's connections have all closed: its drain is over). Registered after
    /// that (on the loop thread), `fn` runs at once: a pool made late must not keep the loop.
    /// The hook holds `owner` weakly: it runs only while the owner lives, and the hooks of
    /// owners gone are dropped as others are added (a client made and destroyed while the
    /// server runs leaves nothing behind here).
    void on_drained(std::weak_ptr<const void> owner, std::function<void()> fn);

    /// For the watchdog: when the current iteration started dispatching (0 while waiting).
    std::int64_t busy_since_ns() const noexcept { return busy_since_.load(std::memory_order_relaxed); }

private:
    void run_iteration(bool block);
    static void run_hooks(std::vector<std::function<void()>>& hooks);
    void run_drained_hooks();
    void run_tasks(std::vector<loop_port::task>& tasks);
    void close_port();
    void drop_owned_timers() noexcept;
    std::chrono::nanoseconds wait_timeout(bool block) const;

    std::unique_ptr<io::driver> driver_;
    tls_driver* tls_ = nullptr;
    std::shared_ptr<loop_port> port_;
    const logger& log_;
    unsigned index_;
    timer_heap timers_;
    clock::time_point now_;
    std::vector<io::completion> completions_;
    std::vector<loop_port::task> tasks_;
    std::vector<deferred*> deferred_;
    std::vector<deferred*> deferred_running_;
    std::vector<std::function<void()>> stop_hooks_;
    struct drained_hook {
        std::weak_ptr<const void> owner;
        std::function<void()> fn;
    };
    std::vector<drained_hook> drained_hooks_;
    std::size_t drained_prune_at_ = 16; ///< prune dead hooks when this many are held
    std::size_t live_ = 0;
    std::size_t background_ = 0; ///< of live_
    bool stopping_ = false;
    bool stop_hooks_ran_ = false;
    bool drained_hooks_ran_ = false;
    std::atomic<bool> stop_requested_{false};
    std::atomic<std::int64_t> busy_since_{0};
};

} // namespace sluice::detail
