// Admission control: a fixed number of permits, a bounded FIFO queue of waiters and a
// wait timeout (the fix for S3's bufferbloat and S4's Semaphore(50) per instance).
//
//   sluice::limiter uploads({.permits = 50, .max_queue = 200, .wait_timeout = 2s});
//   srv.post("/upload", sluice::limited(uploads, upload_handler));   // per route
//   srv.get("/a", sluice::limited(all, a));  srv.get("/b", sluice::limited(all, b));  // per server
//   uploads.acquire(ex.executor(), [](std::error_code ec, sluice::permit p) { ... });  // client calls
//
// Contract:
// - A permit is held from its grant until it is released, exactly once. For a limited route
//   that is when the exchange ends (completed, timed out, failed, disconnected, stopped), not
//   when the handler returns: an async request still holds its permit while it is suspended.
//   A sluice::permit releases on release() or destruction, whichever comes first.
// - Waiting costs no thread on the reactor backends: a queued request is suspended with
//   start_async() and re-dispatched on its own loop when a permit frees (the handler then
//   sees is_initial() == true, as if it had never waited). A queued acquire() is a list entry
//   and a loop timer.
// - Waiters are served first come, first served (FIFO); a new arrival never overtakes a
//   waiter, even when it finds a permit being handed over.
// - Full queue: a limited route answers 503 with Retry-After at once; acquire() reports
//   limit_errc::queue_full. Waited longer than wait_timeout: 503 with Retry-After, or
//   limit_errc::wait_timed_out.
// - Thread-safe: any member from any thread (I/O loops, pool workers, foreign threads).
// - The limiter object may be destroyed before the requests and permits that use it: they
//   share its state.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <system_error>

#include <sluice/executor.h>
#include <sluice/handler.h>

namespace sluice {

namespace detail {
class limiter_core;
struct limiter_waiter;
} // namespace detail

/// Why acquire() did not grant a permit.
enum class limit_errc {
    queue_full = 1, ///< every permit is in use and max_queue waiters wait already
    wait_timed_out, ///< no permit freed within wait_timeout
    cancelled,      ///< the waiter was cancelled (wait_handle::cancel)
};

const std::error_category& limit_category() noexcept;

inline std::error_code make_error_code(limit_errc e) noexcept {
    return {static_cast<int>(e), limit_category()};
}

struct limiter_options {
    /// Work admitted at once (>= 1).
    std::size_t permits = 100;
    /// Waiters beyond the permits; 0 rejects at once when every permit is in use.
    std::size_t max_queue = 1000;
    /// How long a waiter may wait (> 0 when max_queue > 0: a waiter never waits forever).
    std::chrono::milliseconds wait_timeout{5000};
    /// The Retry-After value of a 503 (RFC 9110 §10.2.3), in seconds.
    std::chrono::seconds retry_after{1};
};

struct limiter_stats {
    std::size_t in_use = 0;      ///< permits held now
    std::size_t queued = 0;      ///< waiters now
    std::uint64_t granted = 0;   ///< permits granted so far (at once or after waiting)
    std::uint64_t rejected = 0;  ///< turned away because the queue was full
    std::uint64_t timed_out = 0; ///< waited wait_timeout without a permit
    std::uint64_t cancelled = 0; ///< left the queue otherwise (client gone, cancel(), server stop)
    std::size_t max_in_use = 0;  ///< the highest in_use seen
};

/// One permit, released on release() or destruction (exactly once). Move-only.
class permit {
public:
    permit() noexcept = default;
    permit(permit&& other) noexcept = default;
    permit& operator=(permit&& other) noexcept;
    permit(const permit&) = delete;
    permit& operator=(const permit&) = delete;
    ~permit() { release(); }

    /// Gives the permit back (to the first waiter, if any); a no-op the second time.
    void release() noexcept;
    explicit operator bool() const noexcept { return core_ != nullptr; }

    /// For the limiter: wraps a permit already counted as in use.
    explicit permit(std::shared_ptr<detail::limiter_core> core) noexcept : core_(std::move(core)) {}

private:
    std::shared_ptr<detail::limiter_core> core_;
};

/// The callback of acquire(): runs on the executor's loop, with a permit or an error.
using acquire_callback = std::function<void(std::error_code, permit)>;

/// Cancels a waiting acquire(); harmless once it was served.
class wait_handle {
public:
    wait_handle() noexcept = default;
    explicit wait_handle(std::weak_ptr<detail::limiter_waiter> w) noexcept : waiter_(std::move(w)) {}
    /// Takes the waiter out of the queue; its callback then runs with limit_errc::cancelled.
    /// False when it had already been granted, rejected or timed out.
    bool cancel() noexcept;

private:
    std::weak_ptr<detail::limiter_waiter> waiter_;
};

class limiter {
public:
    /// Throws std::invalid_argument on permits == 0, a negative duration, or a queue without a
    /// wait timeout.
    explicit limiter(limiter_options options = {});
    ~limiter();
    limiter(const limiter&) = delete;
    limiter& operator=(const limiter&) = delete;

    /// A permit if one is free and nobody waits; an empty permit otherwise. Never queues.
    permit try_acquire() noexcept;
    /// Requests a permit; `done` runs on `on`'s loop (posted, never inline): at once when a
    /// permit is free, after waiting in FIFO order otherwise, or with an error (queue_full,
    /// wait_timed_out, cancelled). If that loop has stopped, `done` is dropped unrun (a permit
    /// it would have carried is released). Throws std::invalid_argument on an empty executor.
    wait_handle acquire(const executor& on, acquire_callback done);

    limiter_stats stats() const noexcept;
    const limiter_options& options() const noexcept;

    /// For limited(): the shared state.
    const std::shared_ptr<detail::limiter_core>& core() const noexcept { return core_; }

private:
    std::shared_ptr<detail::limiter_core> core_;
};

/// A handler that runs `inner` only while it holds a permit of `lim`, queueing the request
/// (suspended, no thread) when every permit is in use and answering 503 with Retry-After when
/// the queue is full or the wait times out. The permit is released when the exchange ends.
handler limited(limiter& lim, handler inner);

} // namespace sluice

template <>
struct std::is_error_code_enum<sluice::limit_errc> : std::true_type {};
