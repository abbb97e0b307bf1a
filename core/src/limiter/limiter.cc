// The public face of the limiter: options, permits, acquire() for client calls.
#include <stdexcept>
#include <string>

#include <sluice/limiter.h>

#include "limiter/limiter_core.h"

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
    detail::limiter_waiter::wake how{async_context(), on, std::move(done)};
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
    // The wait's deadline is a loop timer; it holds the core, so the limiter object may go first.
    const bool armed = on.post_after(core_->options().wait_timeout, [core = core_, w] {
        detail::limiter_waiter::wake left;
        if (core->time_out(*w, left)) {
            left.done(limit_errc::wait_timed_out, permit());
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
