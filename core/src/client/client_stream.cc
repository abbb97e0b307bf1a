// client_body_stream: the coroutine form of a streamed call, over send_streaming's callbacks
// (client_stream.h, body_stream_state.h).
#include <algorithm>
#include <utility>

#include <sluice/client_stream.h>

#include "client/body_stream_state.h"

namespace sluice {

namespace detail {

client_stream_handler body_stream_state::handler() {
    // The owner keeps this state alive for the callbacks (plain pointers: no allocation each).
    body_stream_state* self = this;
    return {.on_head = [self](client_response h) { self->on_head(std::move(h)); },
            .on_body = [self](std::string_view piece) { self->on_body(piece); },
            .on_end = [self](std::error_code e) { self->on_end(e); },
            .owner = shared_from_this()};
}

void body_stream_state::set_call(client_call call) {
    bool cancel_now = false;
    {
        std::lock_guard lock(mu_);
        call_ = std::move(call);
        call_set_ = true;
        if (paused_) {
            call_.pause_body(); // asked for before the handle was here (the client's own loop)
        }
        cancel_now = cancel_wanted_;
    }
    if (cancel_now) {
        (void)call_.cancel();
    }
}

void body_stream_state::pause_locked() noexcept {
    if (paused_) {
        return;
    }
    paused_ = true;
    // Under mu_, so the client's pause flag follows paused_ in the same order whichever thread
    // asks (start_next resumes from the coroutine's thread). On the call's loop, that is from
    // inside on_body, it stops the next read at once; pieces of a read already made (an
    // io_uring multishot batch) may still come and are held.
    if (call_set_) {
        call_.pause_body();
    }
}

std::string body_stream_state::take_held() {
    const std::size_t n = std::min(client_body_stream::max_piece, held_.size() - held_off_);
    std::string out = held_.substr(held_off_, n);
    held_off_ += n;
    if (held_off_ == held_.size()) {
        held_.clear(); // keeps the capacity for the next batch
        held_off_ = 0;
    }
    return out;
}

void body_stream_state::on_head(client_response head) {
    std::optional<completion<client_body_stream>> waiter;
    {
        std::lock_guard lock(mu_);
        waiter.swap(head_waiter_);
    }
    if (waiter) {
        // A stream() await that was cancelled meanwhile ignores this; the stream made here is
        // then destroyed at once, which cancels the call.
        (*waiter)(result<client_body_stream>(client_body_stream(shared_from_this(), std::move(head))));
    }
}

void body_stream_state::on_body(std::string_view piece) {
    if (piece.empty()) {
        return;
    }
    std::optional<completion<body_step>> waiter;
    body_step step;
    {
        std::lock_guard lock(mu_);
        if (piece_waiter_ && held_.empty()) {
            const std::size_t n = std::min(client_body_stream::max_piece, piece.size());
            step.bytes.assign(piece.substr(0, n));
            piece.remove_prefix(n);
            waiter.swap(piece_waiter_);
        }
        held_.append(piece);
        if (!held_.empty()) {
            pause_locked(); // nobody asked for these: the upstream waits until someone does
        }
    }
    if (waiter) {
        (*waiter)(result<body_step>(std::move(step)));
    }
}

void body_stream_state::on_end(std::error_code e) {
    std::optional<completion<client_body_stream>> head_waiter;
    std::optional<completion<body_step>> piece_waiter;
    {
        std::lock_guard lock(mu_);
        ended_ = true;
        end_error_ = e;
        head_waiter.swap(head_waiter_);
        if (held_.empty()) {
            piece_waiter.swap(piece_waiter_); // else the held pieces go out first
        }
    }
    if (head_waiter) {
        // Before the head: the call failed as a send() would (an empty code cannot come here;
        // reset stands in, so that the await never reads as a success without a stream).
        (*head_waiter)(result<client_body_stream>(e ? e : make_error_code(client_errc::reset)));
    }
    if (piece_waiter) {
        (*piece_waiter)(result<body_step>(body_step{.bytes = {}, .end = true, .error = e}));
    }
}

void body_stream_state::start_next(completion<body_step> done) {
    std::optional<body_step> now;
    {
        std::lock_guard lock(mu_);
        if (!held_.empty()) {
            now.emplace(body_step{.bytes = take_held(), .end = false, .error = {}});
        } else if (ended_) {
            now.emplace(body_step{.bytes = {}, .end = true, .error = end_error_});
        } else {
            piece_waiter_.emplace(std::move(done));
            if (paused_) {
                // The coroutine asks and nothing is held: only now does the upstream go on.
                paused_ = false;
                if (call_set_) {
                    call_.resume_body();
                }
            }
            return;
        }
    }
    done(result<body_step>(std::move(*now)));
}

void body_stream_state::cancel() noexcept {
    client_call call;
    {
        std::lock_guard lock(mu_);
        if (!call_set_) {
            cancel_wanted_ = true; // the head came before send_streaming returned: set_call cancels
            return;
        }
        call = call_;
    }
    (void)call.cancel(); // false when the call has ended: nothing to do
}

} // namespace detail

client_body_stream& client_body_stream::operator=(client_body_stream&& other) noexcept {
    if (this != &other) {
        if (state_ && !ended_) {
            state_->cancel();
        }
        state_ = std::move(other.state_);
        head_ = std::move(other.head_);
        error_ = other.error_;
        ended_ = other.ended_;
    }
    return *this;
}

client_body_stream::~client_body_stream() {
    if (state_ && !ended_) {
        state_->cancel(); // a no-op when the call ended already (a whole body not read to its end)
    }
}

client_body_stream::next_awaiter client_body_stream::next() {
    return next_awaiter(*this, async_op<detail::body_step>([s = state_](completion<detail::body_step> done) {
        if (!s) { // a moved-from stream
            done(result<detail::body_step>(
                detail::body_step{.bytes = {}, .end = true, .error = client_errc::cancelled}));
            return;
        }
        // The exchange ended while next() waited: the await completes with
        // operation_canceled (async_op) and the upstream call ends with it.
        std::weak_ptr<detail::body_stream_state> weak = s;
        done.on_cancel([weak] {
            if (auto alive = weak.lock()) {
                alive->cancel();
            }
        });
        s->start_next(std::move(done));
    }));
}

void client_body_stream::cancel() const noexcept {
    if (state_) {
        state_->cancel();
    }
}

client_body_piece client_body_stream::take(result<detail::body_step> r) {
    if (!r) {
        // The await itself failed: the exchange has ended (also when it had before this next()
        // began, so that no canceller ran) or the completion was lost. The call may still run:
        // it ends here, not only in the destructor, which skips a stream that has ended.
        cancel();
        ended_ = true;
        error_ = r.error();
        return client_body_piece(error_);
    }
    if (r->end) {
        ended_ = true;
        error_ = r->error;
        return client_body_piece(error_);
    }
    return client_body_piece(std::move(r->bytes));
}

} // namespace sluice
