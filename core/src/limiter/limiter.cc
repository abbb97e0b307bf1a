// The public face of the limiter: options, permits, acquire() for client calls.
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include <sluice/limiter.h>

#include "exchange/exchange_access.h"
#include "limiter/limiter_core.h"
#include "loop/loop.h"
#include "loop/loop_port.h"

namespace sluice {

namespace {

class limit_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "sluice.limiter"; }
    std::string message(int ev) const override {
        switch (static_cast<limit_errc>(ev)) {
        case limit_errc::queue_full:
            return "every permit is in use and the wait queue is full";
        case limit_errc::wait_timed_out:
            return "no permit came free within the wait timeout";
        case limit_errc::cancelled:
            return "the wait for a permit was cancelled";
        }
        return "unknown limiter error";
    }
};

// The deadline of one acquire() wait, a timer on the waiter's loop. Touched on that loop's
// thread only: armed by a posted task, and withdrawn by the wait's result, which is posted
// there too (or is the timer's own firing), so that a wait granted or cancelled long before
// its wait_timeout leaves no timer behind holding the waiter and the core.
struct wait_timer {
    detail::timer* armed = nullptr;
    bool finished = false; // the result was delivered: a late arming task arms nothing

    void withdraw(detail::loop_port& port) noexcept {
        finished = true;
        if (armed != nullptr) {
            port.owner_loop().cancel_call(std::exchange(armed, nullptr));
        }
    }
};

limiter_options checked(limiter_options o) {
    if (o.permits == 0) {
        throw std::invalid_argument("limiter: permits must be at least 1");
    }
    if (o.wait_timeout.count() < 0 || o.retry_after.count() < 0) {
        throw std::invalid_argument("limiter: durations must not be negative");
    }
    if (o.max_queue > 0 && o.wait_timeout.count() == 0) {
        throw std::invalid_argument(
            "limiter: a wait queue needs a wait timeout (a waiter never waits forever)");
    }
    return o;
}

} // namespace

const std::error_category& limit_category() noexcept {
    static const limit_category_impl category;
    return category;
}

permit& permit::operator=(permit&& other) noexcept {
    if (this != &other) {
        release();
        core_ = std::move(other.core_);
    }
    return *this;
}

void permit::release() noexcept {
    if (auto c = std::move(core_)) {
        c->release();
    }
}

bool wait_handle::cancel() noexcept {
    auto w = waiter_.lock();
    if (!w) {
        return false;
    }
    auto c = w->core.lock();
    if (!c) {
        return false;
    }
    detail::limiter_waiter::wake how;
    if (!c->cancel(*w, how)) {
        return false;
    }
    detail::limiter_core::post_result(how.exec, std::move(how.done), limit_errc::cancelled, permit());
    return true;
}

limiter::limiter(limiter_options options) : core_(std::make_shared<detail::limiter_core>(checked(options))) {}

limiter::~limiter() = default;

permit limiter::try_acquire() noexcept {
    return core_->try_take() ? permit(core_) : permit();
}

wait_handle limiter::acquire(const executor& on, acquire_callback done) {
    if (!on) {
        throw std::invalid_argument("limiter::acquire: no executor to run the callback on");
    }
    if (!done) {
        throw std::invalid_argument("limiter::acquire: empty callback");
    }
    auto w = std::make_shared<detail::limiter_waiter>();
    w->core = core_;
    auto deadline = std::make_shared<wait_timer>();
    // Every result runs on `on`'s loop (posted there, or the timer's firing), which holds its
    // port: the port outlives the callback.
    detail::loop_port* port = detail::exchange_access::port(on).get();
    acquire_callback result = [deadline, port, done = std::move(done)](std::error_code ec, permit p) {
        deadline->withdraw(*port);
        done(ec, std::move(p));
    };
    detail::limiter_waiter::wake how{async_context(), on, std::move(result)};
    switch (core_->enqueue(w, how)) {
    case detail::limiter_core::admission::granted:
        detail::limiter_core::post_result(on, std::move(how.done), {}, permit(core_));
        return {};
    case detail::limiter_core::admission::rejected:
        detail::limiter_core::post_result(on, std::move(how.done), limit_errc::queue_full, permit());
        return {};
    case detail::limiter_core::admission::must_wait:
        break;
    }
    // A wait whose loop stops before its timer fires would stay queued for good, holding a
    // slot and its callback: whatever drops the arming task or the timer unrun (a loop's end)
    // takes the waiter out of the queue, and the callback is dropped with it. Once the wait has
    // its result this finds it no longer queued and does nothing.
    auto leave_queue = std::shared_ptr<void>(nullptr, [core = core_, w](void*) noexcept {
        detail::limiter_waiter::wake left;
        (void)core->cancel(*w, left);
    });
    // The timer holds the core, so the limiter object may go first.
    const bool armed =
        on.post([deadline, port, core = core_, w, leave_queue, timeout = core_->options().wait_timeout] {
            if (deadline->finished) {
                return; // granted or cancelled before the timer was armed
            }
            auto expire = [core, w] {
                detail::limiter_waiter::wake left;
                if (core->time_out(*w, left)) {
                    left.done(limit_errc::wait_timed_out, permit());
                }
            };
            try {
                deadline->armed = port->owner_loop().call_after(timeout, [deadline, expire, leave_queue] {
                    deadline->armed = nullptr; // firing: the timer deletes itself
                    expire();
                });
            } catch (const std::bad_alloc&) {
                expire(); // no memory for the deadline: the wait ends now rather than never
            }
        });
    if (!armed) {
        // The loop has stopped: nothing would ever run the callback there. Leave the queue.
        detail::limiter_waiter::wake left;
        (void)core_->cancel(*w, left);
    }
    return wait_handle(w);
}

limiter_stats limiter::stats() const noexcept {
    return core_->stats();
}

const limiter_options& limiter::options() const noexcept {
    return core_->options();
}

} // namespace sluice
