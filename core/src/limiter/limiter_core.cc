#include "limiter/limiter_core.h"

#include <utility>

namespace sluice::detail {

struct limiter_core::handoff {
    std::shared_ptr<limiter_waiter> waiter; // destroyed after the unlock
    async_context resumed;                  // likewise: it may hold the last state reference
    executor exec;
    acquire_callback done; // set: post it with a fresh permit
};

limiter_stats limiter_core::stats() const noexcept {
    std::lock_guard lock(mu_);
    limiter_stats s;
    s.in_use = in_use_;
    s.queued = queued_;
    s.granted = granted_;
    s.rejected = rejected_;
    s.timed_out = timed_out_;
    s.cancelled = cancelled_;
    s.max_in_use = max_in_use_;
    return s;
}

void limiter_core::take_locked() noexcept {
    ++in_use_;
    ++granted_;
    if (in_use_ > max_in_use_) {
        max_in_use_ = in_use_;
    }
}

limiter_core::admission limiter_core::admit(limiter_waiter& w) noexcept {
    std::lock_guard lock(mu_);
    if (permit_free_locked()) {
        take_locked();
        w.ph = limiter_waiter::phase::running;
        return admission::granted;
    }
    if (queued_ >= opts_.max_queue) {
        ++rejected_;
        w.ph = limiter_waiter::phase::done;
        return admission::rejected;
    }
    return admission::must_wait;
}

limiter_core::admission limiter_core::enqueue(const std::shared_ptr<limiter_waiter>& w,
                                              limiter_waiter::wake& how) noexcept {
    std::lock_guard lock(mu_);
    if (permit_free_locked()) {
        take_locked();
        w->ph = limiter_waiter::phase::granted;
        return admission::granted;
    }
    if (queued_ < opts_.max_queue) {
        try {
            queue_.push_back(w);
        } catch (const std::bad_alloc&) {
            ++rejected_;
            w->ph = limiter_waiter::phase::done;
            return admission::rejected;
        }
        w->pos = std::prev(queue_.end());
        w->ph = limiter_waiter::phase::queued;
        w->how = std::move(how);
        ++queued_;
        return admission::must_wait;
    }
    ++rejected_;
    w->ph = limiter_waiter::phase::done;
    return admission::rejected;
}

bool limiter_core::try_take() noexcept {
    std::lock_guard lock(mu_);
    if (!permit_free_locked()) {
        return false;
    }
    take_locked();
    return true;
}

void limiter_core::release_locked(handoff& h) noexcept {
    if (queue_.empty()) {
        --in_use_;
        return;
    }
    // Handed over, not returned: in_use stays, so a newcomer cannot take it first (FIFO).
    h.waiter = std::move(queue_.front());
    queue_.pop_front();
    --queued_;
    ++granted_;
    limiter_waiter& w = *h.waiter;
    w.ph = limiter_waiter::phase::granted;
    if (w.how.ctx) {
        // Resumed under the mutex: once anyone sees `granted`, the one resume is already issued,
        // so the waiter's timeout listener never needs to resume it, and no late resume can hit
        // a later suspension of the handler. If the exchange is already ending, resume() is
        // refused and ended() gives the permit back.
        h.resumed = std::move(w.how.ctx);
        (void)h.resumed.resume();
    } else {
        // The permit now belongs to the callback (posted after the unlock).
        w.ph = limiter_waiter::phase::done;
        h.exec = std::move(w.how.exec);
        h.done = std::move(w.how.done);
    }
}

void limiter_core::finish(handoff& h) noexcept {
    if (h.done) {
        post_result(h.exec, std::move(h.done), {}, permit(shared_from_this()));
    }
    h.resumed = async_context();
    h.waiter.reset();
}

void limiter_core::release() noexcept {
    handoff h;
    {
        std::lock_guard lock(mu_);
        release_locked(h);
    }
    finish(h);
}

limiter_core::redispatch limiter_core::enter(limiter_waiter& w) noexcept {
    std::lock_guard lock(mu_);
    switch (w.ph) {
    case limiter_waiter::phase::granted:
        w.ph = limiter_waiter::phase::running;
        return redispatch::first;
    case limiter_waiter::phase::running:
        return redispatch::again;
    default:
        return redispatch::none;
    }
}

bool limiter_core::leave_queue(limiter_waiter& w, limiter_waiter::wake& how) noexcept {
    if (w.ph != limiter_waiter::phase::queued) {
        return false;
    }
    // The caller holds a reference to w, so erasing the queue's own does not free it.
    queue_.erase(w.pos);
    --queued_;
    w.ph = limiter_waiter::phase::done;
    how = std::move(w.how);
    return true;
}

bool limiter_core::time_out(limiter_waiter& w, limiter_waiter::wake& how) noexcept {
    std::lock_guard lock(mu_);
    if (!leave_queue(w, how)) {
        return false;
    }
    ++timed_out_;
    return true;
}

bool limiter_core::cancel(limiter_waiter& w, limiter_waiter::wake& how) noexcept {
    std::lock_guard lock(mu_);
    if (!leave_queue(w, how)) {
        return false;
    }
    ++cancelled_;
    return true;
}

void limiter_core::ended(limiter_waiter& w) noexcept {
    limiter_waiter::wake left; // destroyed after the unlock (it may hold the last state reference)
    handoff h;
    {
        std::lock_guard lock(mu_);
        switch (w.ph) {
        case limiter_waiter::phase::queued:
            leave_queue(w, left);
            ++cancelled_;
            break;
        case limiter_waiter::phase::granted:
        case limiter_waiter::phase::running:
            w.ph = limiter_waiter::phase::done;
            release_locked(h);
            break;
        default:
            break;
        }
    }
    finish(h);
}

void limiter_core::post_result(const executor& on, acquire_callback done, std::error_code ec,
                               permit p) noexcept {
    try {
        // std::function needs a copyable callable: the move-only permit travels in a box. If the
        // task is dropped unrun (a stopped loop), the box's permit is released there.
        auto box = std::make_shared<permit>(std::move(p));
        (void)on.post([done = std::move(done), ec, box] { done(ec, std::move(*box)); });
    } catch (const std::bad_alloc&) {
        // Out of memory: the callback is lost; a permit it carried is released with p or box.
    }
}

} // namespace sluice::detail
