// The async state machine of one exchange, written once for every backend.
//
// Tomcat's AsyncStateMachine has 13 states because its transitions run on foreign
// threads. Here a foreign thread only ever does one thing: win (or lose) a
// transition under the state's mutex and post the follow-up to the exchange's loop.
// Everything else — timers, listeners, sending, re-dispatch, freeing — runs on the
// loop thread. The states:
//
//                      start_async()
//        [idle] ------------------------> [started]  (the handler is still running)
//          ^                                |   |
//          | handler returns                |   | complete()/resume() while the handler runs:
//          | without start_async            |   | recorded, applied when it returns (deferral)
//          | (sync: send, done)             |   v
//          |                                |  [started_complete] / [started_resume]
//          |                 handler returns|          | handler returns
//          |                                v          v
//          |                           [suspended] ---> [completing] --(loop sends)--> [done]
//          |                             |  |  |  complete()
//          |                             |  |  +------------> [resuming] --(loop)-+
//          |                             |  |        resume()                      |
//          +-----------------------------|--|--------------------------------------+ re-dispatch
//                                        |  |                                        (handler runs again)
//                              timeout   |  | client gone / write failed / shutdown
//                                        v  +-------------------------------------------> [done]
//                                  [timing_out]  on_timeout listeners run;                on_error,
//                                    |   |   |   they may complete() or resume()          on_complete
//                   nobody completed |   |   +--> [completing] / [resuming]
//                                    |   +------> [suspended] again, if set_timeout() was called
//                                    v            meanwhile and nobody completed or resumed
//                 [done] (timeout status: 503, or the route's choice)
//
// Exactly one of complete / timeout / error reaches [done]; a later call returns false. A
// handler that throws after its complete() or resume() was accepted changes nothing: the
// accepted call already won (the exception is only logged).
// on_complete runs exactly once, when the exchange is released (done or not: a
// completing exchange whose connection died still reports, with the error).
#pragma once

#include <any>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/async_context.h>
#include <sluice/response.h>

#include "loop/loop_port.h"

namespace sluice::detail {

enum class async_phase : std::uint8_t {
    idle,             ///< no async in the current dispatch
    started,          ///< start_async() called, the handler has not returned yet
    started_complete, ///< ... and complete() was called (deferred)
    started_resume,   ///< ... and resume() was called (deferred)
    suspended,        ///< the handler returned; waiting for complete / resume / timeout / error
    completing,       ///< complete() won; the loop will send the response
    resuming,         ///< resume() won; the loop will dispatch the handler again
    timing_out,       ///< the timeout won; on_timeout listeners are running on the loop
    done,             ///< terminal
};

const char* to_string(async_phase p) noexcept;

/// The connection side of an async exchange; called on the loop thread only.
class async_host {
public:
    /// The state moved to completing or resuming from a foreign thread or a listener; the host
    /// acts on it (send or re-dispatch) when the posted task runs.
    virtual void on_async_signal(std::uint64_t generation) noexcept = 0;
    /// The timeout was changed from a foreign thread; re-arm with state.take_timeout().
    virtual void on_async_timeout_changed(std::uint64_t generation) noexcept = 0;
    /// on_drained() was called while suspended: run it once the output has drained.
    virtual void on_async_drain_wanted(std::uint64_t generation) noexcept = 0;

protected:
    ~async_host() = default;
};

class async_state {
public:
    async_state(std::shared_ptr<loop_port> port, async_host* host, std::uint64_t generation) noexcept
        : port_(std::move(port)), host_(host), generation_(generation) {}
    async_state(const async_state&) = delete;
    async_state& operator=(const async_state&) = delete;

    void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            delete this;
        }
    }

    // --- any thread (async_context) ---
    bool complete(std::optional<response> r) noexcept;
    bool resume() noexcept;
    bool set_timeout(std::chrono::milliseconds t) noexcept;
    bool set_timeout_status(int status) noexcept;
    bool add_listener(async_event_kind kind, async_listener l);
    /// on_drained(): false once ended (complete() won, or done) or if fn is empty.
    bool set_drain_callback(std::function<void()> fn);
    /// Stores or replaces an attribute; a no-op once detached. A replaced value is destroyed
    /// outside the lock (what it holds may call back in).
    void set_attribute(std::string name, std::any value);
    std::any attribute(std::string_view name) const;
    bool is_done() const noexcept { return done_.load(std::memory_order_acquire); }

    // --- loop thread (the connection) ---
    /// start_async() in the running handler. False if already done.
    bool start(std::chrono::milliseconds timeout) noexcept;
    /// The handler returned: what to do now.
    enum class after_dispatch { finish, suspend, complete, resume, fail };
    after_dispatch handler_returned() noexcept;
    /// The handler threw. A complete() or resume() accepted before (or meanwhile, from another
    /// thread) already won the one terminal transition: returns complete or resume and leaves
    /// the phase for handler_returned() to apply. Otherwise the exchange fails here: returns
    /// fail (now done; on_error is due) or finish (it had already ended).
    after_dispatch handler_threw() noexcept;
    /// Loop-side reading of a signal posted by a foreign thread: completing or resuming.
    async_phase phase() const noexcept;
    /// completing -> done (the response goes out); `handed` receives the response passed to
    /// complete(response), or stays empty for complete(). False if not completing.
    bool take_completion(std::optional<response>& handed) noexcept;
    /// resuming -> idle, ready for the handler to run again.
    bool begin_resume() noexcept;
    /// suspended -> timing_out; false if something else won, or if set_timeout() changed the
    /// timeout since the host last took it (take_timeout): its signal re-arms the timer.
    bool begin_timeout() noexcept;
    /// After the on_timeout listeners ran: expired (timing_out -> done), rearmed (set_timeout()
    /// was called meanwhile: back to suspended, with state.take_timeout()) or taken (a listener
    /// or another thread completed or resumed; its signal decides).
    enum class timeout_outcome { expired, rearmed, taken };
    timeout_outcome finish_timeout() noexcept;
    /// Any non-terminal phase -> done with an error; false if already done or completing
    /// (then the completion owns the outcome).
    bool fail() noexcept;
    /// Calls invoke(listener) for each listener of `kind` registered before the call, in
    /// registration order (loop thread). Nothing is copied or allocated: on_complete releases
    /// limiter permits and coroutine frames and must run also when memory is short (a copy of
    /// a std::function allocates when its target is large). Each listener is moved out of its
    /// slot while it runs, without the lock (it may add listeners, complete, set_timeout), and
    /// put back after: on_timeout runs again after a re-arm. invoke must not throw.
    template <class Invoke>
    void run_listeners(async_event_kind kind, Invoke&& invoke) noexcept;
    /// The on_drained() callback, if one waits and the exchange is suspended (else empty).
    std::function<void()> take_drain_callback() noexcept;
    /// Puts back a callback taken with take_drain_callback() whose drain has not come after all;
    /// no signal (the host looks again on its next send completion). Dropped unrun if the
    /// suspension ended or another callback was registered meanwhile.
    void restore_drain_callback(std::function<void()> fn) noexcept;
    /// The coroutine runner's canceller (coro_run::end), for the moment the timeout has won: after
    /// the on_timeout listeners ran and none completed, resumed or re-armed it. Not a listener:
    /// a listener runs before that is known, and a coroutine cancelled by a timeout that a later
    /// listener extends would leave the exchange with nobody to finish it. Any thread; replaces
    /// an earlier one; false if done or fn is empty.
    bool set_expiry_hook(std::function<void()> fn) noexcept;
    /// Loop thread, on timeout_outcome::expired: the hook, moved out (empty if none).
    std::function<void()> take_expiry_hook() noexcept;
    /// Whether an on_drained() callback waits.
    bool drain_wanted() const noexcept;
    /// Drops a waiting on_drained() callback unrun (the suspension it waited in ended).
    void drop_drain_callback() noexcept;
    /// Marks on_complete as fired; true the first time.
    bool claim_on_complete() noexcept;
    /// The exchange is gone: the host may not be called any more, and the state lets go of what
    /// its users gave it (listeners, attributes, the drain callback, the expiry hook), which may
    /// hold handles to this state: a listener that captures its own context is a cycle.
    void detach() noexcept;

    /// The timeout, read only (the host arms its timer with take_timeout instead).
    std::chrono::milliseconds timeout() const noexcept;
    /// The timeout, for the host arming its timer with it: a change made before is now seen.
    std::chrono::milliseconds take_timeout() noexcept;
    int timeout_status() const noexcept;
    std::uint64_t generation() const noexcept { return generation_; }
    async_host* host() const noexcept { return host_; }

private:
    ~async_state() = default;
    bool post_signal(void (async_host::*signal)(std::uint64_t) noexcept) noexcept;
    void set_phase(async_phase p) noexcept;
    bool ended_locked() const noexcept; ///< done, or complete() won (under mu_)

    mutable std::mutex mu_;
    std::atomic<std::uint32_t> refs_{1};
    std::atomic<bool> done_{false};
    async_phase phase_ = async_phase::idle;
    bool on_complete_fired_ = false;
    bool detached_ = false;       // detach() ran: attributes are no longer kept
    bool rearmed_ = false;        // set_timeout() while timing_out: the timeout starts again
    bool timeout_unseen_ = false; // set_timeout() while suspended, not yet taken by the host
    int timeout_status_ = 503;
    std::chrono::milliseconds timeout_{0};
    std::optional<response> handed_;
    std::vector<std::pair<std::string, std::any>> attributes_;
    std::vector<std::pair<async_event_kind, async_listener>> listeners_;
    std::function<void()> drain_;   // on_drained(); it usually holds a handle to this state
    std::function<void()> expired_; // set_expiry_hook()
    std::shared_ptr<loop_port> port_;
    async_host* host_; // loop thread only; null once detached
    std::uint64_t generation_;
};

template <class Invoke>
void async_state::run_listeners(async_event_kind kind, Invoke&& invoke) noexcept {
    std::unique_lock lock(mu_);
    // Listeners registered meanwhile wait for the next event; slots keep their index when the
    // vector grows under a listener.
    const std::size_t end = listeners_.size();
    for (std::size_t i = 0; i < end; ++i) {
        auto& [k, slot] = listeners_[i];
        if (k != kind || !slot) {
            continue;
        }
        async_listener running;
        running.swap(slot); // noexcept, where a move assignment need not be
        lock.unlock();
        invoke(static_cast<const async_listener&>(running));
        lock.lock();
        listeners_[i].second.swap(running);
    }
}

} // namespace sluice::detail
