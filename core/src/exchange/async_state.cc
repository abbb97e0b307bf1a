#include "exchange/async_state.h"

namespace sluice::detail {

const char* to_string(async_phase p) noexcept {
    switch (p) {
    case async_phase::idle:
        return "idle";
    case async_phase::started:
        return "started";
    case async_phase::started_complete:
        return "started_complete";
    case async_phase::started_resume:
        return "started_resume";
    case async_phase::suspended:
        return "suspended";
    case async_phase::completing:
        return "completing";
    case async_phase::resuming:
        return "resuming";
    case async_phase::timing_out:
        return "timing_out";
    case async_phase::done:
        return "done";
    }
    return "?";
}

void async_state::set_phase(async_phase p) noexcept {
    phase_ = p;
    if (ended_locked()) {
        done_.store(true, std::memory_order_release);
    }
}

bool async_state::ended_locked() const noexcept {
    // complete() winning is the terminal transition, before the loop has taken its response too:
    // no phase leads back from these, and nothing but on_complete runs any more.
    return phase_ == async_phase::done || phase_ == async_phase::completing ||
           phase_ == async_phase::started_complete;
}

bool async_state::post_signal(void (async_host::*signal)(std::uint64_t) noexcept) noexcept {
    retain();
    // The task owns a reference through a handle: run or dropped unrun (a loop that stops
    // with it still queued destroys it), the reference is released either way.
    async_context hold(this);
    try {
        return port_->post([hold = std::move(hold), signal] {
            // Runs on the loop thread, where host_ is only ever changed: no lock needed for it.
            async_state* self = hold.state();
            if (self->host_ != nullptr) {
                (self->host_->*signal)(self->generation_);
            }
        });
    } catch (...) {
        // Allocation failure while posting: the exchange ends by its timeout or with its
        // connection.
        return false;
    }
}

bool async_state::complete(std::optional<response> r) noexcept {
    std::unique_lock lock(mu_);
    switch (phase_) {
    case async_phase::started:
        // Servlet's deferral rule: the handler is still running; act when it returns.
        set_phase(async_phase::started_complete);
        handed_ = std::move(r);
        return true;
    case async_phase::suspended:
    case async_phase::timing_out:
        set_phase(async_phase::completing);
        handed_ = std::move(r);
        lock.unlock();
        post_signal(&async_host::on_async_signal);
        return true;
    default:
        return false;
    }
}

bool async_state::resume() noexcept {
    std::unique_lock lock(mu_);
    switch (phase_) {
    case async_phase::started:
        set_phase(async_phase::started_resume);
        return true;
    case async_phase::suspended:
    case async_phase::timing_out:
        set_phase(async_phase::resuming);
        lock.unlock();
        post_signal(&async_host::on_async_signal);
        return true;
    default:
        return false;
    }
}

bool async_state::set_timeout(std::chrono::milliseconds t) noexcept {
    std::unique_lock lock(mu_);
    // Idle (no start_async() in this dispatch) and a won resume (deferred or not: the resumed
    // dispatch's start_async() will set its own) have no suspension the value could bound:
    // refused rather than accepted and dropped.
    if (ended_locked() || t.count() < 0 || phase_ == async_phase::idle || phase_ == async_phase::resuming ||
        phase_ == async_phase::started_resume) {
        return false;
    }
    timeout_ = t;
    // Servlet lets onTimeout extend the exchange with setTimeout; so do we: while the on_timeout
    // listeners run, a new timeout re-arms unless one of them completes or resumes.
    rearmed_ = rearmed_ || phase_ == async_phase::timing_out;
    const bool armed = phase_ == async_phase::suspended;
    // The host takes the new value from its mailbox; until then its timer still runs to the old
    // deadline, which must not end the exchange: this change came first (begin_timeout).
    timeout_unseen_ = timeout_unseen_ || armed;
    lock.unlock();
    // While the handler runs, the timer is armed when it returns, with the new value.
    if (armed && !post_signal(&async_host::on_async_timeout_changed)) {
        lock.lock();
        timeout_unseen_ = false; // no signal will come: the old deadline stands
    }
    return true;
}

bool async_state::set_timeout_status(int status) noexcept {
    if (status < 500 || status > 599) {
        return false;
    }
    std::lock_guard lock(mu_);
    if (ended_locked()) {
        return false;
    }
    timeout_status_ = status;
    return true;
}

bool async_state::add_listener(async_event_kind kind, async_listener l) {
    std::lock_guard lock(mu_);
    // on_complete still runs after a winning complete(): it is accepted until done.
    const bool ended = kind == async_event_kind::complete ? phase_ == async_phase::done : ended_locked();
    if (ended || !l) {
        return false;
    }
    listeners_.emplace_back(kind, std::move(l));
    return true;
}

bool async_state::set_drain_callback(std::function<void()> fn) {
    if (!fn) {
        return false;
    }
    std::function<void()> replaced;
    std::unique_lock lock(mu_);
    if (ended_locked()) {
        return false;
    }
    replaced = std::exchange(drain_, std::move(fn));
    const bool suspended = phase_ == async_phase::suspended;
    lock.unlock();
    // While the handler runs, the host looks when it suspends; while suspended, only a signal
    // tells it (the output may already be empty: no send completion would come to look).
    if (suspended) {
        post_signal(&async_host::on_async_drain_wanted);
    }
    return true; // `replaced` is destroyed here, outside the lock: it may hold a handle to us
}

std::function<void()> async_state::take_drain_callback() noexcept {
    std::lock_guard lock(mu_);
    if (phase_ != async_phase::suspended) {
        return {};
    }
    return std::exchange(drain_, nullptr);
}

void async_state::restore_drain_callback(std::function<void()> fn) noexcept {
    {
        std::lock_guard lock(mu_);
        if (phase_ == async_phase::suspended && !drain_) {
            drain_ = std::move(fn);
            return;
        }
    }
    // `fn` is destroyed here, outside the lock: it may hold a handle to this state.
}

bool async_state::set_expiry_hook(std::function<void()> fn) noexcept {
    if (!fn) {
        return false;
    }
    std::function<void()> replaced;
    std::lock_guard lock(mu_);
    if (phase_ == async_phase::done) {
        return false;
    }
    replaced.swap(expired_);
    expired_.swap(fn);
    return true;
}

std::function<void()> async_state::take_expiry_hook() noexcept {
    std::function<void()> fn;
    std::lock_guard lock(mu_);
    fn.swap(expired_);
    return fn;
}

bool async_state::drain_wanted() const noexcept {
    std::lock_guard lock(mu_);
    return static_cast<bool>(drain_);
}

void async_state::drop_drain_callback() noexcept {
    std::function<void()> dropped;
    {
        std::lock_guard lock(mu_);
        dropped = std::exchange(drain_, nullptr);
    }
}

void async_state::set_attribute(std::string name, std::any value) {
    // `value` ends up holding what is dropped (a replaced value, or this one once detached): a
    // parameter, destroyed after the lock is released.
    std::lock_guard lock(mu_);
    if (detached_) {
        return; // kept now, it would live as long as the state, maybe through a cycle
    }
    for (auto& [n, v] : attributes_) {
        if (n == name) {
            v.swap(value);
            return;
        }
    }
    attributes_.emplace_back(std::move(name), std::move(value));
}

std::any async_state::attribute(std::string_view name) const {
    std::lock_guard lock(mu_);
    for (const auto& [n, v] : attributes_) {
        if (n == name) {
            return v;
        }
    }
    return {};
}

bool async_state::start(std::chrono::milliseconds timeout) noexcept {
    std::lock_guard lock(mu_);
    switch (phase_) {
    case async_phase::idle:
        set_phase(async_phase::started);
        timeout_ = timeout;
        return true;
    case async_phase::started:
    case async_phase::started_complete:
    case async_phase::started_resume:
        return true; // a second start_async() in one dispatch: same context
    default:
        return false;
    }
}

async_state::after_dispatch async_state::handler_returned() noexcept {
    std::lock_guard lock(mu_);
    switch (phase_) {
    case async_phase::started:
        set_phase(async_phase::suspended);
        return after_dispatch::suspend;
    case async_phase::started_complete:
        set_phase(async_phase::completing);
        return after_dispatch::complete;
    case async_phase::started_resume:
        set_phase(async_phase::resuming);
        return after_dispatch::resume;
    default:
        return after_dispatch::finish;
    }
}

async_state::after_dispatch async_state::handler_threw() noexcept {
    std::lock_guard lock(mu_);
    switch (phase_) {
    case async_phase::started_complete:
        return after_dispatch::complete;
    case async_phase::started_resume:
        return after_dispatch::resume;
    case async_phase::done:
        return after_dispatch::finish;
    default:
        // In the same critical section as the check: a complete() from another thread either
        // came first (and wins above) or finds the exchange done.
        set_phase(async_phase::done);
        return after_dispatch::fail;
    }
}

async_phase async_state::phase() const noexcept {
    std::lock_guard lock(mu_);
    return phase_;
}

bool async_state::take_completion(std::optional<response>& handed) noexcept {
    std::lock_guard lock(mu_);
    if (phase_ != async_phase::completing) {
        return false;
    }
    set_phase(async_phase::done);
    handed = std::move(handed_);
    handed_.reset();
    return true;
}

bool async_state::begin_resume() noexcept {
    std::lock_guard lock(mu_);
    if (phase_ != async_phase::resuming) {
        return false;
    }
    set_phase(async_phase::idle);
    return true;
}

bool async_state::begin_timeout() noexcept {
    std::lock_guard lock(mu_);
    if (phase_ != async_phase::suspended || timeout_unseen_) {
        return false;
    }
    set_phase(async_phase::timing_out);
    rearmed_ = false;
    return true;
}

async_state::timeout_outcome async_state::finish_timeout() noexcept {
    std::lock_guard lock(mu_);
    if (phase_ != async_phase::timing_out) {
        return timeout_outcome::taken;
    }
    if (rearmed_) {
        rearmed_ = false;
        set_phase(async_phase::suspended);
        return timeout_outcome::rearmed;
    }
    set_phase(async_phase::done);
    return timeout_outcome::expired;
}

bool async_state::fail() noexcept {
    std::lock_guard lock(mu_);
    if (phase_ == async_phase::done || phase_ == async_phase::completing) {
        return false;
    }
    set_phase(async_phase::done);
    return true;
}

bool async_state::claim_on_complete() noexcept {
    std::lock_guard lock(mu_);
    if (on_complete_fired_) {
        return false;
    }
    on_complete_fired_ = true;
    set_phase(async_phase::done);
    return true;
}

void async_state::detach() noexcept {
    // Loop thread; the posted tasks that read host_ run on the same thread.
    host_ = nullptr;
    // Everything below may hold a handle to this state (a cycle that would keep it, and all it
    // holds, forever): a drain callback usually does, a listener or an attribute may
    // (`ctx.on_timeout([ctx] ...)` is the obvious fallback). No event fires after the exchange
    // is released and the phase is done, so nothing new is accepted; a stale handle reading an
    // attribute finds none. Destroyed outside the lock: what they capture may call back in.
    // The caller (~exchange) still holds its reference, so this state outlives the releases.
    std::vector<std::pair<async_event_kind, async_listener>> listeners;
    std::vector<std::pair<std::string, std::any>> attributes;
    {
        std::lock_guard lock(mu_);
        detached_ = true;
        listeners.swap(listeners_);
        attributes.swap(attributes_);
    }
    drop_drain_callback();
    // The expiry hook points at a coroutine runner that on_complete has released.
    (void)take_expiry_hook();
}

std::chrono::milliseconds async_state::timeout() const noexcept {
    std::lock_guard lock(mu_);
    return timeout_;
}

std::chrono::milliseconds async_state::take_timeout() noexcept {
    std::lock_guard lock(mu_);
    timeout_unseen_ = false;
    return timeout_;
}

int async_state::timeout_status() const noexcept {
    std::lock_guard lock(mu_);
    return timeout_status_;
}

} // namespace sluice::detail
