// The exchange half of a connection: dispatching the handler, the async signals and
// timeout, and queueing the response (the lifecycle diagram is in connection.h).
#include <exception>

#include <sluice/error.h>

#include "exchange/exchange_access.h"
#include "http/response_access.h"
#include "server/connection.h"
#include "server/loop_context.h"
#include "server/worker_pool.h"

namespace sluice::detail {

namespace {

sluice::request& request_of(exchange& ex) noexcept {
    return exchange_access::request(ex);
}

// A stream whose status has no content (204, 304) sends its head only, as for HEAD: chunk
// framing after that head would be read as the next response (RFC 9110 §6.4.1).
http::response_framing stream_framing(const request& req, const response& res, bool keep_alive) noexcept {
    return {req.version(), req.method() == "HEAD" || !http::sends_content(res.status()), keep_alive};
}

} // namespace

void connection::dispatch() noexcept {
    state_ = state::dispatching;
    if (lc_.server.cfg.dispatch == dispatch_mode::pool && lc_.server.workers != nullptr) {
        exchange_access::begin_dispatch(ex());
        const bool submitted = lc_.server.workers->submit([this] {
            run_handler();
            // Posting back orders the handler's writes before the loop reads the exchange.
            if (!lc_.loop.port().post([this] { on_worker_returned(); })) {
                // The loop is gone only after every connection closed, which waits for us.
                std::terminate();
            }
        });
        if (submitted) {
            return;
        }
        // The pool is stopping: answer here rather than drop the request.
        ex().response().status(503).text("Service Unavailable: shutting down\n");
        close_after_flush_ = true;
        finish_exchange(exchange_errc::shutting_down);
        return;
    }
    do {
        exchange_access::begin_dispatch(ex());
        run_handler();
    } while (after_handler());
}

void connection::on_worker_returned() noexcept {
    if (after_handler()) {
        dispatch();
    }
}

void connection::run_handler() noexcept {
    handler_threw_ = false;
    try {
        (*work_->handler)(ex());
    } catch (const std::exception& e) {
        handler_threw_ = true;
        lc_.server.log.error("handler for {} {} threw: {}", request_of(ex()).method(),
                             request_of(ex()).path(), e.what());
    } catch (...) {
        handler_threw_ = true;
        lc_.server.log.error("handler for {} {} threw a non-exception", request_of(ex()).method(),
                             request_of(ex()).path());
    }
}

bool connection::after_handler() noexcept {
    async_state* st = exchange_access::state(ex());
    if (handler_threw_) {
        if (st != nullptr && st->fail()) {
            fire(async_event_kind::error, exchange_errc::handler_threw);
        }
        auto& res = ex().response();
        if (!response_access::is_head_sent(res)) {
            res.clear();
            res.status(500).text("Internal Server Error\n");
        }
        close_after_flush_ = close_after_flush_ || response_access::is_head_sent(res);
        finish_exchange(exchange_errc::handler_threw);
        return false;
    }
    if (pending_error_ != exchange_errc{}) {
        // The client left while a worker ran the handler.
        if (st != nullptr) {
            (void)st->handler_returned();
        }
        abort_exchange(pending_error_);
        return false;
    }
    if (st == nullptr) {
        finish_exchange({});
        return false;
    }
    switch (st->handler_returned()) {
    case async_state::after_dispatch::finish:
        finish_exchange({});
        return false;
    case async_state::after_dispatch::suspend:
        suspend();
        return false;
    case async_state::after_dispatch::complete: {
        std::optional<response> handed;
        if (st->take_completion(handed) && handed) {
            ex().response() = std::move(*handed);
        }
        finish_exchange({});
        return false;
    }
    case async_state::after_dispatch::resume:
        return st->begin_resume();
    }
    return false;
}

void connection::suspend() noexcept {
    state_ = state::suspended;
    lc_.counters.add(lc_.counters.suspended, 1);
    const auto timeout = exchange_access::state(ex())->timeout();
    async_deadline_ = timeout.count() > 0 ? lc_.loop.now() + timeout : clock::time_point{};
    arm_timer();
    if (ex().response().is_streaming()) {
        queue_stream_part();
    }
    if (drain_expired_) {
        end_for_shutdown(); // suspended after the drain ended: no time left to wait
    } else if (peer_closed_) {
        abort_exchange(exchange_errc::client_disconnected);
    } else {
        refresh_deadline();
    }
}

void connection::leave_suspended() noexcept {
    state_ = state::dispatching;
    lc_.counters.add(lc_.counters.suspended, -1);
    async_deadline_ = {};
}

void connection::on_async_signal(std::uint64_t generation) noexcept {
    if (state_ == state::suspended && work_ && generation == generation_) {
        handle_signal();
    }
}

void connection::handle_signal() noexcept {
    async_state* st = exchange_access::state(ex());
    switch (st->phase()) {
    case async_phase::completing: {
        std::optional<response> handed;
        if (!st->take_completion(handed)) {
            return;
        }
        leave_suspended();
        auto& res = ex().response();
        if (handed) {
            if (response_access::is_head_sent(res)) {
                // The stream's head is out: the handed response can only add its body.
                res.write(handed->body());
            } else {
                res = std::move(*handed);
            }
        }
        finish_exchange({});
        return;
    }
    case async_phase::resuming:
        if (st->begin_resume()) {
            leave_suspended();
            dispatch();
        }
        return;
    default:
        return;
    }
}

void connection::on_async_timeout_changed(std::uint64_t generation) noexcept {
    if (state_ != state::suspended || !work_ || generation != generation_) {
        return;
    }
    const auto timeout = exchange_access::state(ex())->timeout();
    async_deadline_ = timeout.count() > 0 ? lc_.loop.now() + timeout : clock::time_point{};
    if (async_deadline_ != clock::time_point{}) {
        // A later deadline is found when the armed timer fires early; an earlier one re-arms now.
        if (!timer_.armed() || timer_.when > async_deadline_) {
            lc_.loop.arm(timer_, async_deadline_);
        }
    }
}

void connection::on_async_timeout() noexcept {
    if (state_ != state::suspended) {
        return;
    }
    async_state* st = exchange_access::state(ex());
    if (!st->begin_timeout()) {
        return; // a completion or resume won the race; its signal is on the way
    }
    fire(async_event_kind::timeout, exchange_errc::timed_out);
    if (state_ != state::suspended) {
        return; // a listener stopped the server or the connection
    }
    if (!st->finish_timeout()) {
        handle_signal(); // a listener completed or resumed
        return;
    }
    leave_suspended();
    auto& res = ex().response();
    if (response_access::is_head_sent(res)) {
        close_after_flush_ = true; // a stream cut short: end it and close, the status is out
    } else {
        res.clear();
        const int status = st->timeout_status();
        res.status(status).text(std::string(reason_phrase(status)) + ": the request timed out\n");
    }
    finish_exchange(exchange_errc::timed_out);
}

bool connection::decide_keep_alive() noexcept {
    const auto& req = request_of(ex());
    const auto& limits = lc_.server.cfg.limits;
    if (!req.keep_alive() || close_after_flush_ || peer_closed_ || shutting_down_ ||
        lc_.loop.stop_requested()) {
        return false;
    }
    if (limits.max_keepalive_requests != 0 && served_ + 1 >= limits.max_keepalive_requests) {
        return false;
    }
    if (lc_.server.keepalive_pressure.load(std::memory_order_relaxed)) {
        return false;
    }
    if (auto c = ex().response().header("Connection"); c && iequals(*c, "close")) {
        return false;
    }
    return true;
}

void connection::queue_stream_part() noexcept {
    auto& res = ex().response();
    const auto& req = request_of(ex());
    http::response_framing f = stream_framing(req, res, stream_keep_alive_);
    try {
        std::string& out = output();
        if (!response_access::is_head_sent(res)) {
            // HTTP/1.0 has no chunked coding: the stream ends by closing.
            f.keep_alive = decide_keep_alive() && req.version() == http_version{1, 1};
            stream_keep_alive_ = f.keep_alive;
            http::serialize_stream_head(res, f, lc_.date(), out);
            response_access::mark_head_sent(res);
        }
        if (const std::string_view part = response_access::pending(res); !part.empty()) {
            if (!f.head_request) {
                http::serialize_chunk(part, f, out);
            }
            response_access::clear_pending(res);
        }
    } catch (const std::bad_alloc&) {
        close_after_flush_ = true;
    }
    schedule_flush();
}

void connection::finish_exchange(std::error_code outcome) noexcept {
    auto& res = ex().response();
    const auto& req = request_of(ex());
    bool keep_alive = false;
    try {
        std::string& out = output();
        if (res.is_streaming()) {
            const bool head_was_out = response_access::is_head_sent(res);
            queue_stream_part();
            http::response_framing f = stream_framing(req, res, stream_keep_alive_);
            if (head_was_out && outcome) {
                // A stream cut short (timeout, a throwing handler): no terminating chunk, so the
                // client sees an incomplete message rather than a whole, truncated body
                // (RFC 9112 §8: incomplete messages are detectable by their framing).
                close_after_flush_ = true;
            } else if (!f.head_request) {
                http::serialize_stream_end(f, out);
            }
            keep_alive = stream_keep_alive_ && !close_after_flush_;
        } else {
            keep_alive = decide_keep_alive();
            http::response_framing f{req.version(), req.method() == "HEAD", keep_alive};
            http::serialize_response(res, f, lc_.date(), out);
        }
    } catch (const std::bad_alloc&) {
        keep_alive = false;
    }
    // A stream's framing was fixed when its head went out: a stop or a failed write since then
    // still closes. (Read before release_exchange, which clears pending_error_.)
    if (!keep_alive || pending_error_ != exchange_errc{} || shutting_down_) {
        close_after_flush_ = true;
    }
    release_exchange(outcome);
    ++served_;
    state_ = state::reading;
    schedule_flush();
    process_input();
}

void connection::abort_exchange(exchange_errc why) noexcept {
    if (state_ == state::suspended) {
        leave_suspended();
    }
    if (work_) {
        async_state* st = exchange_access::state(ex());
        if (st != nullptr && st->fail()) {
            fire(async_event_kind::error, why);
        }
        release_exchange(why);
    }
    state_ = state::reading;
    close_now();
}

void connection::release_exchange(std::error_code outcome) noexcept {
    if (async_state* st = exchange_access::state(ex()); st != nullptr) {
        async_deadline_ = {};
        if (st->claim_on_complete()) {
            fire(async_event_kind::complete, outcome);
        }
    }
    lc_.give_slot(std::move(work_));
    lc_.counters.add(lc_.counters.exchanges_live, -1);
    pending_error_ = {};
}

void connection::fire(async_event_kind kind, std::error_code error) noexcept {
    async_state* st = exchange_access::state(ex());
    try {
        auto listeners = st->listeners(kind);
        if (listeners.empty()) {
            return;
        }
        st->retain();
        async_event ev{kind, error, async_context(st)};
        for (auto& l : listeners) {
            try {
                l(ev);
            } catch (const std::exception& e) {
                lc_.server.log.error("async listener threw: {}", e.what());
            } catch (...) {
                lc_.server.log.error("async listener threw a non-exception");
            }
        }
    } catch (const std::bad_alloc&) {
        lc_.server.log.error("out of memory running async listeners");
    }
}

void connection::queue_error(int status, std::string_view reason) noexcept {
    // The request is unusable: answer, then close (RFC 9112 §9.6 leaves no way to resync).
    http_version v = work_ ? request_of(ex()).version() : http_version{1, 1};
    if (v.major != 1) {
        v = {1, 1};
    }
    try {
        http::serialize_error(status, reason, v, lc_.date(), output());
    } catch (const std::bad_alloc&) {
    }
    lc_.server.log.debug("{}: {} {}", peer_, status, reason);
    if (work_) {
        release_exchange({});
    }
    close_after_flush_ = true;
    schedule_flush();
}

} // namespace sluice::detail
