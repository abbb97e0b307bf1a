// A connection's deadlines: one timer serves the I/O deadline (first request, idle, head,
// body, write) and the async timeout; it is armed at the earlier of the two and moved lazily.
#include "loop/deadline.h"
#include "server/connection.h"
#include "server/loop_context.h"

namespace sluice::detail {

void connection::refresh_deadline() noexcept {
    if (state_ == state::closing) {
        return;
    }
    if (sending_ || state_ == state::lingering) {
        return; // the write deadline, or the lingering one, runs
    }
    deadline_kind want = deadline_kind::none;
    if (state_ == state::reading) {
        switch (phase()) {
        case http::phase::idle:
            want = served_ == 0 ? deadline_kind::first_request : deadline_kind::idle;
            break;
        case http::phase::head:
            want = deadline_kind::head;
            break;
        case http::phase::body:
            want = deadline_kind::body;
            break;
        case http::phase::ready:
        case http::phase::failed:
            break;
        }
    }
    // A head or body deadline runs from the first byte of that part, however slowly the rest
    // trickles in (slowloris); the first request's wait counts as receiving its head.
    if (want == deadline_kind::head && deadline_kind_ == deadline_kind::first_request) {
        deadline_kind_ = deadline_kind::head; // same clock, but now a request is owed a 408
        return;
    }
    if (want != deadline_kind_) {
        set_deadline(want);
    }
}

void connection::set_deadline(deadline_kind kind) noexcept {
    const auto& l = lc_.server.cfg.limits;
    std::uint32_t ms = 0;
    switch (kind) {
    case deadline_kind::none:
        break;
    case deadline_kind::first_request:
    case deadline_kind::head:
        ms = l.header_timeout_ms;
        break;
    case deadline_kind::idle:
        ms = l.idle_timeout_ms;
        break;
    case deadline_kind::body:
        ms = l.body_timeout_ms;
        break;
    case deadline_kind::write:
        ms = l.write_timeout_ms;
        break;
    case deadline_kind::linger:
        ms = l.lingering_timeout_ms;
        break;
    }
    deadline_kind_ = kind;
    io_deadline_ =
        ms == 0 ? clock::time_point{} : deadline_after(lc_.loop.now(), std::chrono::milliseconds(ms));
    arm_timer();
}

void connection::arm_timer() noexcept {
    // The earlier of the two deadlines; a timer already armed earlier stays (lazy: when it fires
    // early, on_timer re-arms for what is then due).
    clock::time_point next = io_deadline_;
    if (async_deadline_ != clock::time_point{} && (next == clock::time_point{} || async_deadline_ < next)) {
        next = async_deadline_;
    }
    if (next != clock::time_point{} && (!timer_.armed() || timer_.when > next)) {
        lc_.loop.arm(timer_, next);
    }
}

void connection::on_timer_fired(timer& t) noexcept {
    static_cast<connection*>(t.ctx)->on_timer();
}

void connection::on_timer() noexcept {
    if (state_ == state::closing) {
        return;
    }
    const auto now = lc_.loop.now();
    if (async_deadline_ != clock::time_point{} && async_deadline_ <= now) {
        async_deadline_ = {};
        on_async_timeout();
    }
    if (state_ != state::closing && io_deadline_ != clock::time_point{} && io_deadline_ <= now) {
        on_deadline();
    }
    if (state_ != state::closing) {
        arm_timer(); // whatever deadline is still ahead
    }
}

void connection::on_deadline() noexcept {
    const deadline_kind kind = deadline_kind_;
    io_deadline_ = {};
    deadline_kind_ = deadline_kind::none;
    switch (kind) {
    case deadline_kind::head:
    case deadline_kind::body:
        if (state_ == state::reading && work_) {
            // The documented 408 goes out after whatever is already queued (responses to
            // earlier pipelined requests keep their order); queue_error closes after the flush,
            // which the write deadline bounds.
            work_->session.fail(408, "the request was not received in time");
            queue_error(408, work_->session.error_reason());
            return;
        }
        close_now();
        return;
    case deadline_kind::first_request:
    case deadline_kind::idle:
        if (state_ == state::reading && output_idle()) {
            close_now(); // nothing was asked: nothing to answer
        }
        return;
    case deadline_kind::write:
        write_failed(); // the client stopped reading
        return;
    case deadline_kind::linger:
        if (linger_for_records_ && lc_.loop.now() < linger_end_ && response_in_flight()) {
            poll_linger(); // TLS: the response is still on its way
            return;
        }
        close_now(); // the client did not end its side in time, or (TLS) has all of the response
        return;
    case deadline_kind::none:
        return;
    }
}

} // namespace sluice::detail
