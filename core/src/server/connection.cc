#include "server/connection.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <exception>

#include <sluice/error.h>

#include "exchange/exchange_access.h"
#include "http/request_builder.h"
#include "http/response_access.h"
#include "loop/deadline.h"
#include "server/loop_context.h"
#include "server/worker_pool.h"
#include "tls/tls_driver.h"

namespace sluice::detail {

namespace {

// Unparsed input kept while an exchange is busy; past it, receiving pauses (backpressure
// against a client that pipelines without reading).
constexpr std::size_t max_buffered_input = std::size_t{64} * 1024;
// Queued output past which no further pipelined request is parsed until some is sent.
constexpr std::size_t max_buffered_output = std::size_t{256} * 1024;
// The most one send asks for. A send's result is an int32_t (backend.h rule 3), so a larger
// request could come back as a negative count; the rest goes in the next send (rule 7).
constexpr std::size_t max_send_bytes = std::size_t{1} << 30;

bool has_bytes(const buffer& b) noexcept {
    return b && !b->empty();
}

// A recv completion that ends receiving for now only (a buffer shortage, a pause, a retry):
// re-armed, not the end of the stream or a failed socket.
bool recv_stopped_for_now(std::int32_t result) noexcept {
    return result == -ENOBUFS || result == -ECANCELED || result == -EAGAIN || result == -EINTR;
}

} // namespace

connection::connection(loop_context& lc, int fd, std::string_view peer)
    : lc_(lc), timer_(&on_timer_fired, this), peer_(peer), fd_(fd) {
    lc_.add(this);
    lc_.loop.retain();
    lc_.counters.add(lc_.counters.open, 1);
}

connection::~connection() {
    lc_.give_buffer(in_);
    lc_.give_buffer(out_);
    lc_.give_buffer(out_next_);
}

exchange& connection::ex() noexcept {
    return work_->ex;
}

http::phase connection::phase() const noexcept {
    return work_ ? work_->session.current_phase() : http::phase::idle;
}

std::string& connection::output() noexcept {
    if (!out_next_) {
        out_next_ = lc_.take_buffer();
    }
    return *out_next_;
}

void connection::start() {
    if (!arm_recv()) {
        close_now();
        return;
    }
    refresh_deadline();
}

bool connection::arm_recv() noexcept {
    recv_armed_ = true;
    hang_up_.armed();
    if (lc_.loop.driver().recv(fd_, this) < 0) {
        recv_armed_ = false;
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Input

void connection::on_io(const io::completion& c) noexcept {
    switch (c.kind) {
    case io::op::recv:
        on_recv(c);
        break;
    case io::op::send:
        on_sent(c);
        break;
    case io::op::close:
        on_closed();
        break;
    case io::op::accept:
    case io::op::connect:
        break;
    }
}

void connection::on_recv(const io::completion& c) noexcept {
    if (!c.more) {
        recv_armed_ = false;
    }
    if (state_ == state::lingering) {
        on_linger_recv(c);
        return;
    }
    if (state_ == state::closing) {
        return;
    }
    if (c.result > 0) {
        hang_up_.received();
        std::string_view data(c.data, static_cast<std::size_t>(c.result));
        if (state_ == state::reading && !in_process_input_ && !has_bytes(in_) && !close_after_flush_) {
            // Fast path: parse straight from the driver's buffer; keep only what is left over.
            data.remove_prefix(parse_from(data));
        }
        if (!data.empty() && state_ != state::closing) {
            if (!in_) {
                in_ = lc_.take_buffer();
            }
            compact_input();
            in_->append(data);
        }
        if (state_ == state::closing) {
            return;
        }
        if (in_ && in_->size() - in_off_ > max_buffered_input && !recv_paused_) {
            recv_paused_ = true;
            hang_up_.paused();
            lc_.loop.driver().pause_recv(fd_, this);
        }
        refresh_deadline();
    } else if (c.result == 0 && (!hang_up_.stale_end() || recv_paused_)) {
        // While paused, end_of_input() notes the bytes ahead of the FIN as unread (eof_unread_);
        // after a resume, a report of the pause is not the end (loop/paused_hang_up.h): receive
        // again below, and the socket gives the rest, then the end again.
        end_of_input();
        return;
    } else if (c.result != 0 && !recv_stopped_for_now(c.result)) {
        peer_gone(exchange_errc::client_disconnected); // the socket failed
        return;
    }
    // The driver stopped receiving (buffer shortage, or the end of a pause): re-arm unless we
    // asked for the pause.
    if (!recv_armed_ && !recv_paused_ && !peer_closed_ && state_ != state::closing && !arm_recv()) {
        peer_gone(exchange_errc::client_disconnected);
    }
}

std::size_t connection::parse_from(std::string_view data) noexcept {
    in_process_input_ = true;
    std::size_t off = 0;
    while (off < data.size() && state_ == state::reading && !close_after_flush_ &&
           (!out_next_ || out_next_->size() < max_buffered_output)) {
        if (!work_) {
            acquire_slot();
            if (!work_) {
                break; // out of memory: acquire_slot closed the connection
            }
        }
        http::server_session& session = work_->session;
        http::feed_result r;
        try {
            r = session.feed(data.substr(off), exchange_access::request(ex()));
        } catch (const std::bad_alloc&) {
            session.fail(503, "out of memory");
            r.status = http::feed_status::failed;
        }
        off += r.consumed;
        if (session.take_continue()) {
            output().append(http::continue_response());
            schedule_flush();
        }
        if (r.status == http::feed_status::request_ready) {
            parse_rest_ = data.size() - off; // pipelined behind this request (decide_keep_alive)
            on_request_ready();
            parse_rest_ = 0;
            continue;
        }
        if (r.status == http::feed_status::failed) {
            queue_error(session.error_status(), session.error_reason());
        }
        break;
    }
    in_process_input_ = false;
    return off;
}

void connection::process_input() noexcept {
    if (in_process_input_ || state_ != state::reading) {
        return;
    }
    if (in_ && in_off_ < in_->size()) {
        in_off_ += parse_from(std::string_view(*in_).substr(in_off_));
    }
    if (in_ && in_off_ == in_->size()) {
        in_->clear();
        in_off_ = 0;
    }
    const std::size_t buffered = in_ ? in_->size() - in_off_ : 0;
    if (recv_paused_ && buffered <= max_buffered_input / 2 && state_ != state::closing) {
        recv_paused_ = false;
        if (!recv_armed_ && (!peer_closed_ || eof_unread_)) {
            // After an end of stream reported while paused, receiving again gives the bytes
            // still ahead of the FIN, then the end once more (backend.h rule 6).
            const bool was_closed = peer_closed_;
            peer_closed_ = false;
            eof_unread_ = false;
            if (!arm_recv()) {
                peer_closed_ = was_closed;
            }
        }
    }
    if (peer_closed_ && state_ == state::reading) {
        close_at_end_of_input();
        if (state_ == state::closing) {
            return;
        }
    }
    trim_buffers();
    refresh_deadline();
}

void connection::compact_input() noexcept {
    // A client that always keeps a partial request behind whole ones never lets the parsed
    // prefix reach the end of the buffer: drop it before more is appended, so the buffer holds
    // at most the unparsed bytes (bounded by max_buffered_input) plus one delivery, however
    // long the connection lives. The move is of the unparsed bytes only, which the append
    // could copy anyway when it grows the buffer.
    if (in_off_ > 0) {
        in_->erase(0, in_off_);
        in_off_ = 0;
    }
}

void connection::acquire_slot() noexcept {
    try {
        work_ = lc_.take_slot();
        exchange_access::bind(ex(), lc_.loop.executor(), this, ++generation_,
                              lc_.server.cfg.async_timeout_ms);
        if (lc_.tls != nullptr && !tls_) {
            // Bytes come only after the handshake, so the decorator's description is ready;
            // kept here because its state goes with the descriptor (tls_driver::peer_info).
            tls_ = lc_.tls->peer_info(fd_);
        }
        request_builder(exchange_access::request(ex())).set_remote_address(peer_);
        request_builder(exchange_access::request(ex())).set_tls(tls_);
        work_->started = lc_.loop.now();
        work_->route = lc_.server.routes.size(); // none yet
    } catch (const std::bad_alloc&) {
        work_.reset();
        lc_.server.log.error("{}: out of memory for a request: closing", peer_);
        close_now();
        return;
    }
    lc_.counters.add(lc_.counters.exchanges_live, 1);
}

void connection::on_request_ready() noexcept {
    state_ = state::dispatching;
    lc_.counters.add(lc_.counters.requests, 1);
    refresh_deadline();
    auto& req = exchange_access::request(ex());
    if (req.target() == "*") { // "OPTIONS *": the session refuses "*" with any other method
        try {
            ex().response().status(200).header("Allow", lc_.server.routes.methods());
        } catch (const std::bad_alloc&) {
            ex().response().status(503);
        }
        finish_exchange({});
        return;
    }
    auto m = lc_.server.routes.match(req.method(), req.path(), lc_.params);
    if (m.status != 0) {
        auto& res = ex().response();
        res.status(m.status);
        if (m.status == 405) {
            res.header("Allow", m.allow);
        }
        res.text(std::string(reason_phrase(m.status)) + "\n");
        finish_exchange({});
        return;
    }
    bool params_ok = false;
    try {
        params_ok = request_builder(req).set_path_params(lc_.params);
    } catch (const std::bad_alloc&) {
    }
    if (!params_ok) {
        ex().response().status(400).text("Bad Request: malformed escape in the path\n");
        finish_exchange({});
        return;
    }
    work_->handler = m.target;
    work_->route = m.route;
    dispatch();
}

void connection::end_of_input() noexcept {
    // The client sends no more. It may still read (a half-close: `printf ... | nc -N`), or it
    // may have closed altogether, which only a failed send would tell.
    peer_closed_ = true;
    eof_unread_ = recv_paused_;
    switch (state_) {
    case state::reading:
        close_at_end_of_input();
        break;
    case state::dispatching:
        // A pool worker runs the handler. A response it gives is still sent; an exchange it
        // suspends ends with client_disconnected (suspend()), as a suspended one does here.
        break;
    case state::suspended:
        // An async exchange hears the end of stream as the client leaving: the client cannot be
        // told apart from one that closed, and a gateway stops its upstream call for it
        // (nginx: 499 "client prematurely closed connection"). The answers queued before it
        // still go out: the client may be reading them.
        abort_exchange(exchange_errc::client_disconnected, queued_output::flush);
        break;
    case state::lingering:
    case state::closing:
        break;
    }
}

void connection::close_at_end_of_input() noexcept {
    // Complete requests already received are answered first: ones buffered while parsing waits
    // for the output to drain, and ones still ahead of the FIN in the kernel (eof_unread_).
    // process_input() comes back here once it has parsed what it can.
    const bool unparsed = in_ && in_off_ < in_->size();
    if (!close_after_flush_ && (eof_unread_ || unparsed)) {
        return;
    }
    // A request cut short has nobody to answer; responses already queued still go out.
    if (output_idle()) {
        close_or_linger(); // bytes may be unread still, when a response ended the connection
    } else {
        close_after_flush_ = true;
    }
}

void connection::peer_gone(exchange_errc why) noexcept {
    peer_closed_ = true;
    switch (state_) {
    case state::reading:
        if (output_idle()) {
            close_now();
        } else {
            close_after_flush_ = true; // the send fails too, or what is queued still goes out
        }
        break;
    case state::dispatching:
        // A pool worker runs the handler: act when it returns.
        pending_error_ = why;
        break;
    case state::suspended:
        abort_exchange(why);
        break;
    case state::lingering:
        close_now();
        break;
    case state::closing:
        break;
    }
}

// ---------------------------------------------------------------------------------------------
// Output

void connection::schedule_flush() noexcept {
    lc_.counters.raise(lc_.counters.output_queued_peak, output_queued());
    if (state_ != state::closing) {
        lc_.loop.defer(*this);
    }
}

void connection::run_deferred() noexcept {
    start_send();
    check_drained();
}

void connection::start_send() noexcept {
    if (sending_ || state_ == state::closing) {
        return;
    }
    if (!has_bytes(out_next_)) {
        if (close_after_flush_ && state_ == state::reading) {
            close_or_linger();
        }
        return;
    }
    std::swap(out_, out_next_);
    out_off_ = 0;
    if (!send_rest()) {
        return;
    }
    // Two bounds (nginx's send_timeout, plus a cap): write_timeout_ms without any progress, and
    // the whole of what is queued within write_timeout_ms plus min_send_rate's allowance per
    // byte, counted from when the connection's output stopped being idle. Progress alone does
    // not renew the cap, or a client reading a few bytes now and then would hold the
    // connection forever (slow read). Output queued while sending adds only its allowance.
    const auto now = lc_.loop.now();
    const std::chrono::milliseconds timeout(lc_.server.cfg.limits.write_timeout_ms);
    if (deadline_kind_ != deadline_kind::write) {
        deadline_kind_ = deadline_kind::write;
        write_cap_ = deadline_after(now, timeout);
    }
    write_cap_ = deadline_after(write_cap_, send_allowance(out_->size()));
    renew_write_deadline();
}

void connection::renew_write_deadline() noexcept {
    const std::chrono::milliseconds timeout(lc_.server.cfg.limits.write_timeout_ms);
    io_deadline_ = std::min(deadline_after(lc_.loop.now(), timeout), write_cap_);
    arm_timer();
}

bool connection::send_rest() noexcept {
    iov_ = {out_->data() + out_off_, std::min(out_->size() - out_off_, max_send_bytes)};
    sending_ = true;
    if (lc_.loop.driver().send(fd_, &iov_, 1, this) < 0) {
        sending_ = false;
        write_failed();
        return false;
    }
    return true;
}

std::chrono::milliseconds connection::send_allowance(std::size_t bytes) const noexcept {
    const std::uint64_t rate = lc_.server.cfg.limits.min_send_rate;
    if (rate == 0) {
        return std::chrono::milliseconds(0);
    }
    // bytes / rate seconds, in whole milliseconds (bytes < 2^63 / 1000 on any real buffer).
    return std::chrono::milliseconds(
        static_cast<std::int64_t>(bytes / rate * 1000 + bytes % rate * 1000 / rate));
}

void connection::write_failed() noexcept {
    // Nothing queued can go out any more: unlike peer_gone(), never wait for a flush.
    peer_closed_ = true;
    switch (state_) {
    case state::suspended:
        abort_exchange(exchange_errc::write_failed);
        break;
    case state::dispatching:
        pending_error_ = exchange_errc::write_failed; // a worker has the exchange: act on its return
        break;
    case state::reading:
    case state::lingering:
        close_now();
        break;
    case state::closing:
        break;
    }
}

void connection::on_sent(const io::completion& c) noexcept {
    sending_ = false;
    if (state_ == state::closing) {
        return;
    }
    if (c.result < 0) {
        write_failed();
        return;
    }
    out_off_ += static_cast<std::size_t>(c.result);
    if (out_off_ < out_->size()) {
        if (send_rest() && c.result > 0) {
            renew_write_deadline(); // progress renews the no-progress bound, never the cap
        }
    } else {
        out_->clear();
        out_off_ = 0;
        if (has_bytes(out_next_)) {
            start_send();
        } else if (close_after_flush_ && state_ == state::reading) {
            close_or_linger();
            return;
        } else {
            deadline_kind_ = deadline_kind::none;
            process_input(); // output was the bottleneck, or there is simply nothing to do
        }
    }
    check_drained(); // a streaming exchange may wait for this progress (on_drained)
}

void connection::trim_buffers() noexcept {
    // An idle connection holds no buffers: they go back to the loop's pool.
    if (!sending_ && out_ && out_->empty()) {
        lc_.give_buffer(out_);
    }
    if (out_next_ && out_next_->empty()) {
        lc_.give_buffer(out_next_);
    }
    if (in_ && in_->empty()) {
        lc_.give_buffer(in_);
    }
}

// ---------------------------------------------------------------------------------------------
// Shutdown and close

void connection::shutdown() noexcept {
    shutting_down_ = true;
    switch (state_) {
    case state::reading:
        if (work_) {
            break; // a request is being received: it may finish within the drain
        }
        if (lc_.server.drain_idle_after_response.load(std::memory_order_relaxed)) {
            // A hand-over: its next response says Connection: close (shutting_down_), which a
            // client handles without error; closing now races with a request in flight.
            break;
        }
        if (output_idle()) {
            close_now();
        } else {
            close_after_flush_ = true;
        }
        break;
    case state::suspended:
    case state::dispatching:
        // The response in the making will say Connection: close.
        close_after_flush_ = true;
        break;
    case state::lingering:
    case state::closing:
        break; // a lingering connection goes on until the client's end or the drain's
    }
}

void connection::end_for_shutdown() noexcept {
    shutting_down_ = true;
    drain_expired_ = true;
    switch (state_) {
    case state::reading:
        if (work_) {
            close_now(); // a request still not received: nobody is owed an answer yet
        }
        break;
    case state::suspended: {
        async_state* st = exchange_access::state(ex());
        if (!st->fail()) {
            handle_signal(); // complete() won just before: send that response
            return;
        }
        leave_suspended();
        fire(async_event_kind::error, exchange_errc::shutting_down);
        auto& res = ex().response();
        if (!response_access::is_head_sent(res)) {
            res.clear();
            res.status(503)
                .header("Retry-After", "1")
                .text("Service Unavailable: the server is shutting down\n");
        }
        close_after_flush_ = true;
        finish_exchange(exchange_errc::shutting_down);
        break;
    }
    case state::lingering:
        close_now();
        break;
    case state::dispatching:
    case state::closing:
        break; // a worker runs the handler: its response closes the connection
    }
}

void connection::close_for_shutdown() noexcept {
    if (state_ == state::dispatching) {
        close_after_flush_ = true; // not pending_error_: nobody left, the response still goes out
        return;
    }
    close_now();
}

void connection::close_or_linger() noexcept {
    // Closing a socket with received bytes unread makes Linux reset the connection, and a
    // reset can destroy the response just sent before the client reads it (RFC 9112 §9.6): a
    // 413 to a client still sending its body, a response ahead of requests pipelined behind
    // it. When the client may still be sending, the sending side is shut instead (the client
    // sees the end of the response), and what comes is read and dropped until the client's
    // end or limits.lingering_timeout_ms (nginx's lingering_close). A stop lingers too: a
    // response finished in the drain is lost to a reset as easily as any other; the end of the
    // drain (end_for_shutdown) closes what still lingers then.
    const std::uint32_t ms = lc_.server.cfg.limits.lingering_timeout_ms;
    // After the client's end of stream nothing more comes, except what was ahead of it and
    // unread when it was reported (eof_unread_: receiving was paused).
    const bool more_may_come =
        linger_wanted_ || work_ || (in_ && in_off_ < in_->size()) || recv_paused_ || eof_unread_;
    // A TLS peer may send records of its own at any time (a KeyUpdate, RFC 8446 §4.6.3), which
    // the core never sees: one that reaches a closed socket draws a reset, which discards what
    // of the response is still in our send queue (what the client has received stays readable).
    // So a TLS connection lingers while its response is on its way, and no longer.
    const bool records_may_come =
        !more_may_come && lc_.tls != nullptr && lc_.tls->is_tls(fd_) && response_in_flight();
    // Thread-per-connection with a connection waiting for a thread: a lingering connection
    // would hold its thread for a client that is done, so it closes at once.
    const bool pressed = lc_.server.threads_short.load(std::memory_order_relaxed);
    // A cut body that ends by the close closes abortively (close_now): nothing to linger for.
    if (ms == 0 || cut_by_reset_ || (peer_closed_ && !eof_unread_) || !(more_may_come || records_may_come) ||
        drain_expired_ || lc_.drain_over() || pressed || lc_.loop.driver().shutdown_send(fd_) < 0) {
        close_now();
        return;
    }
    if (work_) {
        release_exchange(exchange_errc::client_disconnected); // a request nobody will answer
    }
    state_ = state::lingering;
    lc_.counters.add(lc_.counters.lingering, 1);
    if (in_) {
        in_->clear();
        in_off_ = 0;
    }
    trim_buffers();
    set_deadline(deadline_kind::linger);
    if (records_may_come) {
        linger_for_records_ = true;
        linger_end_ = io_deadline_;
        poll_linger();
    }
    if (!recv_armed_) {
        recv_paused_ = false;
        if (!arm_recv()) {
            close_now();
        }
    }
}

void connection::on_linger_recv(const io::completion& c) noexcept {
    // The bytes are dropped (the loop releases the buffer); the end, or a failure, closes.
    // A report of a pause before the linger is no end (loop/paused_hang_up.h): receive again.
    if ((c.result == 0 && !hang_up_.stale_end()) || (c.result < 0 && !recv_stopped_for_now(c.result)) ||
        (!recv_armed_ && !arm_recv())) {
        close_now();
    }
}

bool connection::response_in_flight() const noexcept {
    int unacked = 0;
    if (::ioctl(fd_, SIOCOUTQ, &unacked) < 0) {
        return true; // cannot tell: the lingering timeout decides
    }
    return unacked > 0 || (lc_.tls != nullptr && lc_.tls->has_unsent(fd_));
}

void connection::poll_linger() noexcept {
    // Nothing tells when the client has acknowledged the last byte: look again shortly, until
    // then or the lingering timeout.
    io_deadline_ = std::min(linger_end_, deadline_after(lc_.loop.now(), linger_poll));
    deadline_kind_ = deadline_kind::linger;
    arm_timer();
}

void connection::close_now() noexcept {
    if (state_ == state::closing) {
        return;
    }
    if (state_ == state::dispatching) {
        // A worker holds the exchange; closing waits for it (after_handler sees the error).
        if (pending_error_ == exchange_errc{}) {
            pending_error_ = exchange_errc::client_disconnected;
        }
        return;
    }
    if (state_ == state::suspended) {
        abort_exchange(exchange_errc::client_disconnected);
        return;
    }
    if (work_) {
        release_exchange(exchange_errc::client_disconnected);
    }
    if (state_ == state::lingering) {
        lc_.counters.add(lc_.counters.lingering, -1);
    }
    state_ = state::closing;
    lc_.loop.cancel(timer_);
    if (cut_by_reset_) {
        // A body that runs until the close was cut: an orderly close (a FIN, close_notify) would
        // make the part look whole, however the close came (flushed, write timeout, the drain's
        // sweep). A reset, and no close_notify, tell the client.
        if (lc_.tls != nullptr) {
            lc_.tls->skip_close_notify(fd_);
        }
        const ::linger abortive{1, 0};
        (void)::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive);
    }
    lc_.loop.driver().close(fd_, this);
}

void connection::on_closed() noexcept {
    lc_.remove(this);
    lc_.counters.add(lc_.counters.open, -1);
    lc_.server.open_connections.fetch_sub(1, std::memory_order_relaxed);
    detail::loop& l = lc_.loop;
    delete this;
    l.release();
}

} // namespace sluice::detail
