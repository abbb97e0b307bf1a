// The streamed relay of one upstream response (see relay.h).
#include "relay.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <sluice/forwarding.h>

#include "gateway.h"

namespace gateway {

namespace {

using sluice::async_context;
using sluice::client_response;
using sluice::exchange;

constexpr const char* relay_attribute = "gateway.relay";

} // namespace

void relay::start(gateway& g, exchange& ex, sluice::client_request up, relay_finish how) {
    auto r = std::make_shared<relay>(how);
    r->exec_ = ex.executor();
    r->method_ = ex.request().method() == "HEAD" ? "HEAD" : "";
    ex.set_attribute(relay_attribute, r);
    async_context ctx = suspend_for_upstream(ex);
    {
        std::lock_guard lock(r->mu_);
        r->ctx_ = ctx;
    }
    // The downstream client left, the async timeout fired or the server stops: the upstream
    // call ends with it, and its connection is closed mid-body (never pooled). A no-op once
    // the call has ended.
    ctx.on_complete([r](const sluice::async_event&) { r->cancel(); });
    // Plain pointers in the callbacks, the relay kept alive by the handler's owner.
    relay* self = r.get();
    const sluice::client_call call =
        g.api.send_streaming(ex.executor(), std::move(up),
                             {.on_head = [self](client_response h) { self->on_head(std::move(h)); },
                              .on_body = [self](std::string_view piece) { self->on_body(piece); },
                              .on_end = [self](std::error_code e) { self->on_end(e); },
                              .owner = r});
    std::lock_guard lock(r->mu_);
    r->call_ = call;
    r->call_set_ = true;
    if (r->upstream_paused_) {
        r->call_.pause_body(); // asked for before the handle was here (the client's own loop)
    }
}

bool relay::on_resumed(exchange& ex) {
    auto r = ex.attribute<std::shared_ptr<relay>>(relay_attribute);
    if (!r || !*r) {
        return false;
    }
    (*r)->dispatch(ex);
    return true;
}

async_context relay::take_wake() {
    if (!ctx_ || head_held_) {
        return {};
    }
    const bool head_due = head_ && !head_out_;
    // A clean end with bytes still pending waits for the drain like any piece (dispatch writes at
    // most max_write at a time); a cut end does not: what is pending goes out with it (bounded
    // by the pause), and the stream is cut.
    const bool end_due = ended_ && (pending_.empty() || end_error_);
    if (end_due || head_due || (drained_ && !pending_.empty())) {
        return std::exchange(ctx_, async_context{});
    }
    return {};
}

void relay::on_head(client_response head) {
    async_context wake;
    bool held = false;
    {
        std::lock_guard lock(mu_);
        head_ = std::move(head);
        // The async style completes a response that is whole before its head went out from
        // on_end, without running the handler again. When the call runs on the exchange's
        // loop (epoll, uring), the rest of the read that brought the head (its body and end,
        // for a small response) is handled before anything posted there runs, so the head's
        // wake waits for that. On the client's own loop (blocking) a post to the exchange's
        // loop would race the rest of the read: the head wakes the handler at once.
        held = how_ == relay_finish::complete_from_callback && ctx_ && !head_out_ && exec_.in_loop_thread();
        head_held_ = held;
        if (!held) {
            wake = take_wake();
        }
    }
    if (!held) {
        (void)wake.resume(); // posted by the core: the handler never runs inside this callback
    } else if (!exec_.post([self = shared_from_this()] { self->on_head_settled(); })) {
        on_head_settled(); // the loop stops: wake now, as the other styles do
    }
}

void relay::on_head_settled() {
    async_context wake;
    {
        std::lock_guard lock(mu_);
        head_held_ = false;
        wake = take_wake(); // empty if on_end completed the exchange, or it has ended
    }
    (void)wake.resume();
}

void relay::on_body(std::string_view piece) {
    async_context wake;
    {
        std::lock_guard lock(mu_);
        pending_.append(piece);
        if (pending_.size() >= high_water && !upstream_paused_) {
            upstream_paused_ = true;
            // Under the lock, so that the client's pause flag follows upstream_paused_ in the
            // same order even when on_drained runs on another thread (blocking backend, pool
            // dispatch). On the call's loop this stops the next read at once.
            if (call_set_) {
                call_.pause_body();
            }
        }
        wake = take_wake();
    }
    (void)wake.resume();
}

void relay::on_end(std::error_code e) {
    async_context wake;
    bool whole_now = false;
    {
        std::lock_guard lock(mu_);
        ended_ = true;
        end_error_ = e;
        whole_now = how_ == relay_finish::complete_from_callback && ctx_ && !head_out_;
        if (!whole_now) {
            wake = take_wake();
        }
    }
    if (whole_now) {
        // The async (complete) style: nothing went out yet, so the whole answer goes at once,
        // from here, without running the handler again.
        sluice::response out;
        async_context ctx;
        {
            std::lock_guard lock(mu_);
            if (!e && head_) {
                head_->body = std::move(pending_); // whole: sent with its length, not streamed
                sluice::copy_response(std::move(*head_), out, method_);
            } else {
                out = downstream_response(
                    sluice::result<client_response>(e ? e : make_error_code(sluice::client_errc::reset)));
            }
            head_out_ = true;
            ctx = std::exchange(ctx_, async_context{});
        }
        (void)ctx.complete(std::move(out));
        return;
    }
    (void)wake.resume();
}

void relay::on_drained() {
    async_context wake;
    {
        std::lock_guard lock(mu_);
        drained_ = true;
        // Pieces of a read already made still arrive after a pause (an io_uring multishot
        // batch): while they keep pending above the mark, the upstream stays paused.
        if (upstream_paused_ && call_set_ && pending_.size() < high_water) {
            upstream_paused_ = false;
            call_.resume_body(); // under the lock: see on_body
        }
        wake = take_wake();
    }
    (void)wake.resume();
}

void relay::cancel() {
    sluice::client_call call;
    {
        std::lock_guard lock(mu_);
        call = call_;
        ctx_ = {}; // the exchange is done: drop the context (it holds this relay's listener)
    }
    call.cancel();
}

void relay::dispatch(exchange& ex) {
    std::optional<client_response> head;
    std::string bytes;
    bool ended = false;
    std::error_code error;
    bool first = false;
    {
        std::lock_guard lock(mu_);
        if (head_ && !head_out_) {
            head = std::move(head_);
            head_out_ = true;
            first = true;
        }
        ended = ended_;
        error = end_error_;
        // Whole when the body ended before its head went out, and all that is left when it was
        // cut: the cut ends the stream at this dispatch, and what the relay holds is bounded by
        // its pause (high_water plus one read).
        if ((ended && (error || first)) || pending_.size() <= max_write) {
            bytes.swap(pending_);
        } else {
            // At most max_write per drain, so that the server's queued output stays bounded
            // even when more than one read's worth came in after the pause.
            bytes.assign(pending_, 0, max_write);
            pending_.erase(0, max_write);
            ended = ended && static_cast<bool>(error); // a clean end waits for the rest
        }
    }
    if (first && ended && !error) {
        // Whole before anything went out: sent as it came, with Content-Length.
        head->body = std::move(bytes);
        sluice::copy_response(std::move(*head), ex.response(), method_);
        return;
    }
    if (ended && error) {
        if (!ex.response().is_committed()) {
            // Nothing went downstream yet, though pieces may have been written: the end came
            // before the handler's return sent the head (a resume accepted while it ran
            // re-dispatches with nothing sent). The client gets the upstream's error, a 502
            // or 504, not the 500 a throw would be answered with.
            ex.response() = downstream_response(sluice::result<client_response>(error));
            return;
        }
        // The head went out and the body was cut upstream: the downstream client must see a cut
        // stream, not a clean end (a terminal chunk would claim a whole body). A handler that
        // throws after the head went out does exactly that (docs/api.md), after what it wrote:
        // the pieces that came before the cut go first, as client::stream gives them.
        ex.response().write(bytes);
        throw std::runtime_error("upstream body cut: " + error.message());
    }
    if (first) {
        // The downstream client gets the upstream's framing: copy_response() declares the
        // upstream's Content-Length (a head without its body), else the stream is chunked. The
        // core holds the stream to the length, so a body cut upstream (the throw above) still
        // reaches the client as fewer bytes than declared and a closed connection. For HEAD
        // the length is the one a GET would have and no body is counted; for 304 the core
        // sends the head alone.
        sluice::copy_response(*head, ex.response(), method_);
    }
    // Streaming from the first piece on (also an empty one: the head goes out now).
    ex.response().write(bytes);
    if (ended) {
        return; // the stream ends with the exchange
    }
    // The next piece, or the drain: no deadline of the exchange's own (suspend_for_upstream).
    // The client's response_timeout bounds a silent upstream (not counted while the body is
    // paused), and the connection's write timeout a slow reader, whose drain may take longer
    // than any fixed wait (limits.min_send_rate).
    async_context ctx = suspend_for_upstream(ex);
    async_context wake;
    {
        std::lock_guard lock(mu_);
        drained_ = false;
        ctx_ = ctx;
        if (pending_.empty()) {
            bytes.clear();
            pending_.swap(bytes); // keep the capacity: the next pieces go into it
        }
        wake = take_wake(); // the end may have come meanwhile
    }
    (void)wake.resume();
    auto self = shared_from_this();
    ctx.on_drained([self] { self->on_drained(); });
}

} // namespace gateway
