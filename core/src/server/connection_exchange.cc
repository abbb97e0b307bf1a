// The exchange half of a connection: dispatching the handler, the async signals and
// timeout, and queueing the response (the lifecycle diagram is in connection.h).
#include <exception>
#include <functional>
#include <new>
#include <optional>

#include <sluice/error.h>

#include "exchange/exchange_access.h"
#include "http/response_access.h"
#include "loop/deadline.h"
#include "server/connection.h"
#include "server/loop_context.h"
#include "server/worker_pool.h"

namespace sluice::detail {

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
        lc_.server.log.error("handler for {} {} threw: {}", ex().request().method(), ex().request().path(),
                             e.what());
    } catch (...) {
        handler_threw_ = true;
        lc_.server.log.error("handler for {} {} threw a non-exception", ex().request().method(),
                             ex().request().path());
    }
}

bool connection::after_handler() noexcept {
    async_state* st = exchange_access::state(ex());
    if (handler_threw_) {
        // A complete() or resume() accepted before the throw owns the outcome (it returned true
        // to its caller): the exception was logged and changes nothing (issue 6, defect 6).
        const auto next = st != nullptr ? st->handler_threw() : async_state::after_dispatch::finish;
        if (next != async_state::after_dispatch::complete && next != async_state::after_dispatch::resume) {
            if (next == async_state::after_dispatch::fail) {
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
    case async_state::after_dispatch::fail:
        finish_exchange({});
        return false;
    case async_state::after_dispatch::suspend:
        suspend();
        return false;
    case async_state::after_dispatch::complete: {
        std::optional<response> handed;
        if (st->take_completion(handed) && handed) {
            adopt_handed(std::move(*handed));
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
    const auto timeout = exchange_access::state(ex())->take_timeout();
    async_deadline_ = timeout.count() > 0 ? deadline_after(lc_.loop.now(), timeout) : clock::time_point{};
    arm_timer();
    if (ex().response().is_streaming() && queue_suspended_stream_part()) {
        return;
    }
    if (drain_expired_) {
        end_for_shutdown(); // suspended after the drain ended: no time left to wait
    } else if (peer_closed_) {
        abort_exchange(exchange_errc::client_disconnected, queued_output::flush);
    } else {
        refresh_deadline();
        if (exchange_access::state(ex())->drain_wanted()) {
            schedule_flush(); // looks after this loop turn (never user code inside suspend)
        }
    }
}

bool connection::queue_suspended_stream_part() noexcept {
    queue_stream_part();
    if (stream_overflow_ && exchange_access::state(ex())->fail()) {
        // Past its declared length the stream can never end well: fail it now, as a throw
        // after the head would, rather than let the handler feed it until its timeout. (A
        // complete() or resume() that won first arrives as a signal; finish_exchange then
        // sees the overflow.)
        leave_suspended();
        fire(async_event_kind::error, exchange_errc::content_length_mismatch);
        finish_exchange(exchange_errc::content_length_mismatch);
        return true;
    }
    return false;
}

void connection::leave_suspended() noexcept {
    state_ = state::dispatching;
    lc_.counters.add(lc_.counters.suspended, -1);
    async_deadline_ = {};
    // An on_drained() waits for the end of this suspension only.
    exchange_access::state(ex())->drop_drain_callback();
}

void connection::on_async_drain_wanted(std::uint64_t generation) noexcept {
    if (state_ == state::suspended && work_ && generation == generation_) {
        // A coroutine writes while the exchange stays suspended (sluice::drained): what it wrote
        // goes out before the output is measured. The callback styles wrote before suspending,
        // and that part is out already.
        if (ex().response().is_streaming() && queue_suspended_stream_part()) {
            return; // past a declared Content-Length: the exchange has failed
        }
        check_drained();
    }
}

void connection::check_drained() noexcept {
    // Called where the queue may have shrunk (a send completed) or a callback was added; a
    // queue above the mark waits for the next send completion, which calls here again.
    if (state_ != state::suspended || output_queued() > output_low_water) {
        return;
    }
    async_state* st = exchange_access::state(ex());
    std::function<void()> fn = st->take_drain_callback();
    if (!fn) {
        return;
    }
    // A coroutine in sluice::drained() wrote, registered fn, and now waits for it: what it wrote
    // goes out before the output is measured. on_async_drain_wanted does that, but its signal
    // can still be in the mailbox when the completion of an earlier send brings us here in the
    // same loop turn (the completions come first). Taking fn under the state's lock ordered
    // the writes before this read, and the writer is parked until fn runs.
    if (auto& res = ex().response(); res.is_streaming() && (!response_access::is_head_sent(res) ||
                                                            !response_access::pending(res).empty())) {
        if (queue_suspended_stream_part()) {
            return; // past a declared length: the exchange failed, and fn is dropped unrun
        }
        if (output_queued() > output_low_water) {
            st->restore_drain_callback(std::move(fn)); // the next send completion looks again
            return;
        }
    }
    try {
        fn(); // it may complete() or resume(): both only post a signal, nothing runs in here
    } catch (const std::exception& e) {
        lc_.server.log.error("on_drained callback threw: {}", e.what());
    } catch (...) {
        lc_.server.log.error("on_drained callback threw a non-exception");
    }
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
        if (handed) {
            adopt_handed(std::move(*handed));
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

void connection::adopt_handed(response&& handed) noexcept {
    auto& res = ex().response();
    if (!response_access::is_head_sent(res)) {
        res = std::move(handed);
        return;
    }
    // The stream's head is out (sent when an earlier dispatch suspended): a second status line
    // would land inside the chunked body, so the handed response can only add its body.
    try {
        res.write(handed.body());
    } catch (const std::bad_alloc&) {
        close_after_flush_ = true; // out of memory: the handed body is lost; do not reuse the connection
    }
}

void connection::on_async_timeout_changed(std::uint64_t generation) noexcept {
    if (state_ != state::suspended || !work_ || generation != generation_) {
        return;
    }
    rearm_async_timeout();
}

void connection::rearm_async_timeout() noexcept {
    const auto timeout = exchange_access::state(ex())->take_timeout();
    async_deadline_ = timeout.count() > 0 ? deadline_after(lc_.loop.now(), timeout) : clock::time_point{};
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
        // A completion or resume won the race, or set_timeout() extended the exchange before
        // this deadline and the loop has not read it yet: its signal is on the way.
        return;
    }
    fire(async_event_kind::timeout, exchange_errc::timed_out);
    if (state_ != state::suspended) {
        return; // a listener stopped the server or the connection
    }
    switch (st->finish_timeout()) {
    case async_state::timeout_outcome::taken:
        handle_signal(); // a listener completed or resumed
        return;
    case async_state::timeout_outcome::rearmed:
        rearm_async_timeout(); // a listener extended the exchange: it stays suspended
        schedule_flush();      // an on_drained() skipped while timing out looks again
        return;
    case async_state::timeout_outcome::expired:
        break;
    }
    leave_suspended();
    // Only now is it known that the timeout ends the exchange: a coroutine's pending await is
    // cancelled here, not by a listener, and the coroutine runs to its end (coro_run::end).
    if (const std::function<void()> expired = st->take_expiry_hook()) {
        expired();
    }
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
    const auto& req = ex().request();
    const auto& limits = lc_.server.cfg.limits;
    if (!req.keep_alive() || close_after_flush_ || shutting_down_ || lc_.loop.stop_requested()) {
        return false;
    }
    if (peer_closed_ && !eof_unread_ && !has_pipelined_input()) {
        return false; // the client sends no more: this is the last response
    }
    if (limits.max_keepalive_requests != 0 && served_ + 1 >= limits.max_keepalive_requests) {
        return false;
    }
    if ((lc_.server.keepalive_pressure.load(std::memory_order_relaxed) ||
         lc_.server.closing_soon.load(std::memory_order_relaxed)) &&
        !has_pipelined_input()) {
        // Under pressure (thread-per-connection: most threads taken) the connection closes to
        // give its thread to a waiting one; in a shutdown delay, before the drain would close
        // it. Not before answering the requests the client already pipelined: those bytes are
        // here, and closing would drop them (RFC 9112 §9.3.2 lets a client retry only
        // idempotent ones). Each response decides again: the first one with nothing more
        // buffered closes.
        return false;
    }
    if (auto c = ex().response().header("Connection"); c && iequals(*c, "close")) {
        return false;
    }
    return true;
}

bool connection::has_pipelined_input() const noexcept {
    if (in_process_input_) {
        return parse_rest_ > 0; // parsing from the driver's buffer or from in_: the rest of it
    }
    return in_ && in_off_ < in_->size(); // e.g. received while a worker or async exchange ran
}

void connection::refuse_interim_status() noexcept {
    auto& res = ex().response();
    const int status = res.status();
    if (status < 100 || status >= 200) {
        return;
    }
    // A 1xx is interim (RFC 9110 §15.2): the client would take it as a preface and wait for
    // the final response, and the next response would answer the wrong request. 101 would
    // announce a protocol switch that never happens (Upgrade is ignored, server_session.cc).
    // The server sends its own 100 Continue; a handler's 1xx is a programming error.
    lc_.server.log.error("handler for {} {} set status {}, which is not a final status: sending 500",
                         ex().request().method(), ex().request().path(), status);
    // As for a status out of range (serializer.cc): 500, with the handler's headers and body,
    // streamed or not (the head is not out yet).
    res.status(500);
}

http::response_framing connection::stream_framing() noexcept {
    const auto& req = ex().request();
    http::response_framing f{req.version(), req.method() == "HEAD", stream_keep_alive_};
    f.no_content = stream_no_content_;
    f.content_length = stream_length_;
    return f;
}

bool connection::stream_length_broken() noexcept {
    // HEAD and a status without content send no body, so they have no count to miss.
    const http::response_framing f = stream_framing();
    return f.content_length && !f.head_request && !f.no_content &&
           (stream_overflow_ || stream_sent_ != *f.content_length);
}

void connection::queue_counted_part(std::string_view part, const http::response_framing& f,
                                    std::string& out) {
    // Bytes past the declared length would be read as the start of the next response on this
    // connection (RFC 9112 §6.3). A part that does not fit is dropped whole rather than cut to
    // fit: the client then has fewer bytes than declared (unless it already had them all) and
    // sees the failure as a cut body, never as a whole one.
    if (!stream_overflow_ && part.size() <= *f.content_length - stream_sent_) {
        stream_sent_ += part.size();
        http::serialize_chunk(part, f, out);
        return;
    }
    if (!stream_overflow_) {
        stream_overflow_ = true;
        lc_.server.log.error(
            "handler for {} {} wrote more than its declared Content-Length {}: closing the connection",
            ex().request().method(), ex().request().path(), *f.content_length);
    }
    close_after_flush_ = true;
}

void connection::queue_stream_part() noexcept {
    auto& res = ex().response();
    const auto& req = ex().request();
    if (!response_access::is_head_sent(res)) {
        refuse_interim_status();
        // Fixed with the head: a status or length changed later cannot change the framing.
        stream_no_content_ = !http::status_has_content(res.status());
        stream_length_ = res.content_length();
        stream_sent_ = 0;
        stream_overflow_ = false;
    }
    http::response_framing f = stream_framing();
    try {
        std::string& out = output();
        if (!response_access::is_head_sent(res)) {
            // HTTP/1.0 has no chunked coding: without a declared length the stream ends by closing.
            f.keep_alive = decide_keep_alive() && (req.version() == http_version{1, 1} || f.content_length);
            stream_keep_alive_ = f.keep_alive;
            http::serialize_stream_head(res, f, lc_.date(), out);
            response_access::mark_head_sent(res);
        }
        if (const std::string_view part = response_access::pending(res); !part.empty()) {
            if (f.content_length && !f.head_request && !f.no_content) {
                queue_counted_part(part, f, out);
            } else {
                http::serialize_chunk(part, f, out); // nothing for HEAD or a status without content
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
    const auto& req = ex().request();
    bool keep_alive = false;
    try {
        std::string& out = output();
        if (res.is_streaming()) {
            const bool head_was_out = response_access::is_head_sent(res);
            queue_stream_part();
            const http::response_framing f = stream_framing();
            const bool length_broken = stream_length_broken();
            if (length_broken && !outcome) {
                if (!stream_overflow_) {
                    lc_.server.log.error("handler for {} {} ended its stream after {} of its declared {} "
                                         "bytes: closing the connection",
                                         req.method(), req.path(), stream_sent_, *f.content_length);
                }
                outcome = exchange_errc::content_length_mismatch;
            }
            if (length_broken || (head_was_out && outcome)) {
                // A stream cut short (timeout, a throwing handler, fewer or more bytes than
                // declared): no terminating chunk, and with a declared length fewer bytes than
                // it, so the client sees an incomplete message rather than a whole, truncated
                // body (RFC 9112 §8: incomplete messages are detectable by their framing).
                // A body that ends by the close has no such framing: its close is a reset.
                close_after_flush_ = true;
                cut_by_reset_ = http::stream_ends_by_close(f);
            } else {
                http::serialize_stream_end(f, out); // nothing for HEAD or a status without content
            }
            keep_alive = stream_keep_alive_ && !close_after_flush_;
        } else {
            refuse_interim_status();
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
    if (lc_.records()) {
        lc_.record(*work_, res.status(), res.body().size());
    }
    release_exchange(outcome);
    ++served_;
    state_ = state::reading;
    schedule_flush();
    process_input();
}

void connection::abort_exchange(exchange_errc why, queued_output output) noexcept {
    const bool dispatched = state_ != state::reading; // not a request still being received
    if (state_ == state::suspended) {
        leave_suspended();
    }
    if (work_) {
        async_state* st = exchange_access::state(ex());
        if (st != nullptr && st->fail()) {
            fire(async_event_kind::error, why);
        }
        if (dispatched && lc_.records()) {
            lc_.record(*work_, 499, 0); // nginx's "client closed request": no response went out
        }
        release_exchange(why);
    }
    state_ = state::reading;
    if (output == queued_output::discard) {
        close_now();
        return;
    }
    // The client ended its stream but may still read: the answers queued before this exchange
    // go out first, and unread input is lingered over rather than reset (close_or_linger).
    close_after_flush_ = true;
    if (output_idle()) {
        close_or_linger();
    } else {
        schedule_flush();
    }
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
    if (kind == async_event_kind::timeout) {
        lc_.counters.add(lc_.counters.async_timeouts, 1);
    } else if (kind == async_event_kind::error) {
        lc_.counters.add(lc_.counters.async_errors, 1);
    }
    async_state* st = exchange_access::state(ex());
    // Nothing here allocates: the listeners run in place, and the event's handle is one more
    // reference on the state. An on_complete skipped for want of memory would keep a limiter's
    // permit and a coroutine's runner for good.
    std::optional<async_event> ev;
    st->run_listeners(kind, [&](const async_listener& l) noexcept {
        if (!ev) {
            st->retain();
            ev.emplace(async_event{kind, error, async_context(st)});
        }
        try {
            try {
                l(*ev);
            } catch (const std::exception& e) {
                lc_.server.log.error("async listener threw: {}", e.what());
            } catch (...) {
                lc_.server.log.error("async listener threw a non-exception");
            }
        } catch (...) {
            // Out of memory logging it: the next listener still runs.
        }
    });
}

void connection::queue_error(int status, std::string_view reason) noexcept {
    // The request is unusable: answer, then close (RFC 9112 §9.6 leaves no way to resync).
    http_version v = work_ ? ex().request().version() : http_version{1, 1};
    if (v.major != 1) {
        v = {1, 1};
    }
    // A failed request's method is in its arena (server_session.cc): a HEAD gets no body.
    const bool head = work_ && ex().request().method() == "HEAD";
    try {
        http::serialize_error(status, reason, v, head, lc_.date(), output());
    } catch (const std::bad_alloc&) {
    }
    lc_.server.log.debug("{}: {} {}", peer_, status, reason);
    linger_wanted_ = true; // what the client sends after the failed part is not read
    if (work_) {
        if (lc_.records()) {
            lc_.record(*work_, status, 0);
        }
        release_exchange({});
    }
    close_after_flush_ = true;
    schedule_flush();
}

} // namespace sluice::detail
