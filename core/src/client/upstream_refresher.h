// Looking an upstream's host names up again (upstream_options::resolve_interval), on a thread
// of the client that is never an I/O loop.
//
//   start() (first call)      interval passed             every host looked up
//   [none] ------------> [waiting] ------------> [looking up] ------------> publish, [waiting]
//                            |                        |
//                       stop(): wakes,           stop(): waited for at most stop_wait,
//                       joined at once           then detached; it exits when the lookup returns
//
// One thread per client, started by its first call, never for an upstream of IP literals only
// or with an interval of 0; never a thread per lookup. A round looks every host name up in
// turn and publishes the set (upstream_state::apply): pools pick it up on their next connect.
//
// Why detach: a lookup cannot be interrupted (getaddrinfo has no cancel, and resolv.conf's
// timeout x attempts can take many seconds), and ~client must return promptly. So the thread
// owns everything it touches (the upstream's state, the logger, the flags) through one
// shared_ptr, and once stopped it publishes nothing and logs nothing: the stop flag and every
// log line share one mutex, so no line is written after stop() returns. Only the user's
// resolve function may still be running (its documented contract).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <sluice/log.h>

#include "client/upstream.h"

namespace sluice::detail {

class upstream_refresher {
public:
    /// How long stop() waits for a lookup in progress before it detaches the thread.
    static constexpr std::chrono::milliseconds stop_wait{100};
    /// A host whose lookups keep failing is warned about at most this often.
    static constexpr std::chrono::seconds warn_every{60};

    upstream_refresher(std::shared_ptr<upstream_state> up, logger log);
    /// stop().
    ~upstream_refresher();
    upstream_refresher(const upstream_refresher&) = delete;
    upstream_refresher& operator=(const upstream_refresher&) = delete;

    /// Starts the thread unless it runs, has stopped, or the upstream does not refresh. Any
    /// thread (a loop's too: it only creates the thread). Never throws: a thread that cannot
    /// be created is logged, and the addresses stay as they are.
    void start() noexcept;
    /// Stops the thread: at once when it waits, at most stop_wait when it looks up. Idempotent.
    void stop() noexcept;

private:
    struct shared {
        std::shared_ptr<upstream_state> up;
        logger log;
        std::mutex mu;
        std::condition_variable cv;
        bool stop = false; // under mu
        bool done = false; // under mu: the thread touches nothing of ours any more
    };
    static void run(const std::shared_ptr<shared>& s) noexcept;

    std::shared_ptr<shared> s_;
    std::mutex mu_; // start() against stop()
    std::thread thread_;
    std::atomic<bool> started_{false}; // read without mu_ first: start() runs on every call
    bool stopped_ = false;
};

} // namespace sluice::detail
