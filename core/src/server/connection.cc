#include "server/connection.h"

#include <cerrno>
#include <exception>

#include <sluice/error.h>

#include "exchange/exchange_access.h"
#include "http/request_builder.h"
#include "http/response_access.h"
#include "server/loop_context.h"
#include "server/worker_pool.h"

namespace sluice::detail {

namespace {

// Unparsed input kept while an exchange is busy; past it, receiving pauses (backpressure
// against a client that pipelines without reading).
constexpr std::size_t max_buffered_input = 64 * 1024;
// Queued output past which no further pipelined request is parsed until some is sent.
constexpr std::size_t max_buffered_output = 256 * 1024;

sluice::request& request_of(exchange& ex) noexcept {
    return exchange_access::request(ex);
}

bool has_bytes(const buffer& b) noexcept {
    return b && !b->empty();
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
    recv_armed_ = true;
    if (lc_.loop.driver().recv(fd_, this) < 0) {
        recv_armed_ = false;
        close_now();
        return;
    }
    refresh_deadline();
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
    if (state_ == state::closing) {
        return;
    }
    if (c.result > 0) {
        std::string_view data(c.data, static_cast<std::size_t>(c.result));
        if (state_ == state::reading && !in_process_input_ && !has_bytes(in_) && !close_after_flush_) {
            // Fast path: parse straight from the driver's buffer; keep only what is left over.
            data.remove_prefix(parse_from(data));
        }
        if (!data.empty() && state_ != state::closing) {
            if (!in_) {
                in_ = lc_.take_buffer();
            }
            in_->append(data);
        }
        if (state_ == state::closing) {
            return;
        }
        if (in_ && in_->size() - in_off_ > max_buffered_input && !recv_paused_) {
            recv_paused_ = true;
            lc_.loop.driver().pause_recv(fd_, this);
        }
        refresh_deadline();
    } else if (c.result == 0) {
        peer_gone(exchange_errc::client_disconnected);
        return;
    } else if (c.result != -ENOBUFS && c.result != -ECANCELED && c.result != -EAGAIN && c.result != -EINTR) {
        peer_gone(exchange_errc::client_disconnected);
        return;
    }
    // The driver stopped receiving (buffer shortage, or the end of a pause): re-arm unless we
    // asked for the pause.
    if (!recv_armed_ && !recv_paused_ && !peer_closed_ && state_ != state::closing) {
        recv_armed_ = true;
        if (lc_.loop.driver().recv(fd_, this) < 0) {
            recv_armed_ = false;
            peer_gone(exchange_errc::client_disconnected);
        }
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
            r = session.feed(data.substr(off), request_of(ex()));
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
            on_request_ready();
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
        in_off_ += static_cast<std::uint32_t>(parse_from(std::string_view(*in_).substr(in_off_)));
    }
    if (in_ && in_off_ == in_->size()) {
        in_->clear();
        in_off_ = 0;
    }
    const std::size_t buffered = in_ ? in_->size() - in_off_ : 0;
    if (recv_paused_ && buffered <= max_buffered_input / 2 && state_ != state::closing) {
        recv_paused_ = false;
        if (!recv_armed_ && !peer_closed_) {
            recv_armed_ = true;
            if (lc_.loop.driver().recv(fd_, this) < 0) {
                recv_armed_ = false;
            }
        }
    }
    trim_buffers();
    refresh_deadline();
}

void connection::acquire_slot() noexcept {
    try {
        work_ = lc_.take_slot();
        exchange_access::bind(ex(), lc_.loop.executor(), this, ++generation_,
                              lc_.server.cfg.async_timeout_ms);
        request_builder(request_of(ex())).set_remote_address(peer_);
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
    auto& req = request_of(ex());
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
    dispatch();
}

void connection::peer_gone(exchange_errc why) noexcept {
    peer_closed_ = true;
    switch (state_) {
    case state::reading:
        // A request cut short has nobody to answer; responses already queued still go out
        // (the peer may only have shut down its sending side).
        if (output_idle()) {
            close_now();
        } else {
            close_after_flush_ = true;
        }
        break;
    case state::dispatching:
        // A pool worker runs the handler: act when it returns.
        pending_error_ = why;
        break;
    case state::suspended:
        abort_exchange(why);
        break;
    case state::closing:
        break;
    }
}

// ---------------------------------------------------------------------------------------------
// Exchanges

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
    http::response_framing f{req.version(), req.method() == "HEAD", stream_keep_alive_};
    try {
        std::string& out = output();
        if (!response_access::is_head_sent(res)) {
            // HTTP/1.0 has no chunked coding: the stream ends by closing.
            f.keep_alive = decide_keep_alive() && req.version() == http_version{1, 1};
            stream_keep_alive_ = f.keep_alive;
            http::serialize_stream_head(res, f, lc_.date(), out);
            response_access::mark_head_sent(res);
        }
        if (!res.body().empty()) {
            if (!f.head_request) {
                http::serialize_chunk(res.body(), f, out);
            }
            res.body().clear();
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
            http::response_framing f{req.version(), req.method() == "HEAD", stream_keep_alive_};
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
    if (!keep_alive) {
        close_after_flush_ = true;
    }
    release_exchange(outcome);
    ++served_;
    state_ = state::reading;
    if (pending_error_ != exchange_errc{} || shutting_down_) {
        close_after_flush_ = true;
    }
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

// ---------------------------------------------------------------------------------------------
// Output

void connection::schedule_flush() noexcept {
    if (state_ != state::closing) {
        lc_.loop.defer(*this);
    }
}

void connection::run_deferred() noexcept {
    start_send();
}

void connection::start_send() noexcept {
    if (sending_ || state_ == state::closing) {
        return;
    }
    if (!has_bytes(out_next_)) {
        if (close_after_flush_ && state_ == state::reading) {
            close_now();
        }
        return;
    }
    std::swap(out_, out_next_);
    out_off_ = 0;
    iov_ = {out_->data(), out_->size()};
    sending_ = true;
    if (lc_.loop.driver().send(fd_, &iov_, 1, this) < 0) {
        sending_ = false;
        peer_gone(exchange_errc::write_failed);
        return;
    }
    set_deadline(deadline_kind::write);
}

void connection::on_sent(const io::completion& c) noexcept {
    sending_ = false;
    if (state_ == state::closing) {
        return;
    }
    if (c.result < 0) {
        peer_closed_ = true;
        if (state_ == state::suspended) {
            abort_exchange(exchange_errc::write_failed);
        } else if (state_ == state::dispatching) {
            pending_error_ = exchange_errc::write_failed;
        } else {
            close_now();
        }
        return;
    }
    out_off_ += static_cast<std::uint32_t>(c.result);
    if (out_off_ < out_->size()) {
        iov_ = {out_->data() + out_off_, out_->size() - out_off_};
        sending_ = true;
        if (lc_.loop.driver().send(fd_, &iov_, 1, this) < 0) {
            sending_ = false;
            close_now();
            return;
        }
        set_deadline(deadline_kind::write); // progress: the write deadline starts again
        return;
    }
    out_->clear();
    out_off_ = 0;
    if (has_bytes(out_next_)) {
        start_send();
        return;
    }
    if (close_after_flush_ && state_ == state::reading) {
        close_now();
        return;
    }
    deadline_kind_ = deadline_kind::none;
    process_input(); // output was the bottleneck, or there is simply nothing to do
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
// Deadlines

void connection::refresh_deadline() noexcept {
    if (state_ == state::closing) {
        return;
    }
    if (sending_) {
        return; // the write deadline runs
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
    }
    deadline_kind_ = kind;
    io_deadline_ = ms == 0 ? clock::time_point{} : lc_.loop.now() + std::chrono::milliseconds(ms);
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
        if (state_ == state::reading && output_idle() && work_) {
            work_->session.fail(408, "the request was not received in time");
            queue_error(408, work_ ? work_->session.error_reason() : "request timeout");
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
        if (state_ == state::suspended) {
            abort_exchange(exchange_errc::write_failed);
        } else if (state_ == state::dispatching) {
            pending_error_ = exchange_errc::write_failed;
        } else {
            close_now();
        }
        return;
    case deadline_kind::none:
        return;
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
    case state::closing:
        break;
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
    case state::dispatching:
    case state::closing:
        break; // a worker runs the handler: its response closes the connection
    }
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
    state_ = state::closing;
    lc_.loop.cancel(timer_);
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
