// One upstream connection (see client_connection.h for the state diagram).
#include "client/client_connection.h"

#include <cerrno>
#include <string>
#include <utility>

#include "client/client_pool.h"
#include "http/client_request_writer.h"
#include "loop/deadline.h"

namespace sluice::detail {

namespace {

// What a failed connect tells the caller. The TLS decorator reports the handshake's end as the
// connect's (tls/tls_driver.h): -EKEYREJECTED for a certificate that failed verification,
// -EPROTO for any other handshake failure.
client_errc connect_error(int rc, bool tls) noexcept {
    if (tls && rc == -EKEYREJECTED) {
        return client_errc::tls_certificate_rejected;
    }
    if (tls && (rc == -EPROTO || rc == -EPROTONOSUPPORT)) {
        return client_errc::tls_handshake_failed;
    }
    return client_errc::refused;
}

} // namespace

client_connection::client_connection(std::shared_ptr<client_pool> pool,
                                     std::shared_ptr<upstream_address> address)
    : pool_(std::move(pool)), loop_(pool_->owner_loop()), transport_(loop_, *this),
      session_(pool_->config().options.max_response_bytes, pool_->config().options.max_response_head_bytes),
      timer_(&on_timer, this), created_(loop_.now()), address_(std::move(address)) {
    // The loop runs until every connection's fd is back from the driver (rule 4). Background:
    // a stopping loop with nothing else left runs the pool's on_drained hook, which closes it.
    loop_.retain_background();
    pool_->config().counters->open.fetch_add(1, std::memory_order_relaxed);
    pool_->config().counters->connects.fetch_add(1, std::memory_order_relaxed);
    // Born connecting, for one call: that call is pending until the connect ends (last, so a
    // constructor that throws has counted nothing).
    pool_->connect_began();
}

void client_connection::start_connect(std::shared_ptr<client_call_state> call) noexcept {
    call_ = std::move(call);
    call_->conn = this;
    const upstream_address& a = *address_;
    client_tls_context* tls = pool_->host(a.host).tls ? pool_->config().tls.get() : nullptr;
    const int rc =
        transport_.open_and_connect(reinterpret_cast<const sockaddr*>(&a.addr), a.len, tls, a.host);
    if (rc < 0) {
        on_connected(rc);
        return;
    }
    arm(pool_->config().options.connect_timeout);
}

void client_connection::on_connected(int rc) noexcept {
    if (state_ != state::connecting) {
        return;
    }
    if (rc < 0 || transport_.start_receiving() < 0) {
        auto call = std::move(call_);
        if (call) {
            call->conn = nullptr;
        }
        auto pool = pool_; // the pool closes this, which may free it at once
        const auto address = address_;
        const client_errc why = connect_error(rc, pool->host(address->host).tls);
        pool->connect_failed(this, address, std::move(call), why);
        return;
    }
    state_ = state::busy;
    pool_->connect_ended();
    auto call = std::move(call_);
    run(std::move(call), false);
}

void client_connection::run(std::shared_ptr<client_call_state> call, bool from_pool) noexcept {
    call_ = std::move(call);
    call_->conn = this;
    state_ = state::busy;
    if (!pool_->aim_head(*call_, address_->host)) {
        // Out of memory: better no request than one whose Host names another server.
        finish_call(result<client_response>(client_errc::invalid_request));
        close_now();
        return;
    }
    from_pool_ = from_pool;
    request_written_ = false;
    head_delivered_ = false;
    held_.clear();
    held_close_ = no_close;
    drain_due_ = false;
    ++served_;
    session_.begin(call_->request.method == "HEAD", call_->response, call_->stream ? this : nullptr);
    arm(pool_->config().options.response_timeout);
    send_request();
}

void client_connection::send_request() noexcept {
    const std::string_view body = http::request_body(call_->request);
    const iovec iov[2] = {{call_->head.data(), call_->head.size()},
                          {const_cast<char*>(body.data()), body.size()}};
    sending_call_ = call_;
    if (transport_.send(iov, 2) < 0) {
        sending_call_.reset();
        broken(-EIO);
    }
}

void client_connection::on_sent(int rc) noexcept {
    sending_call_.reset();
    if (state_ != state::busy) {
        return;
    }
    if (rc < 0) {
        broken(rc);
        return;
    }
    request_written_ = true;
    if (session_.phase() == http::response_phase::complete) {
        complete(false); // the response had come before the request was out
    }
}

void client_connection::on_data(std::string_view bytes) noexcept {
    if (state_ == state::idle) {
        close_now(); // bytes nobody asked for: the connection is out of step
        return;
    }
    if (state_ != state::busy) {
        return;
    }
    if (session_.holding()) {
        // A read that completed before the pause took effect (one batch at most): kept, in order.
        try {
            held_.append(bytes);
        } catch (...) {
            finish_call(result<client_response>(client_errc::reset));
            close_now();
        }
        return;
    }
    consume(bytes);
}

void client_connection::consume(std::string_view bytes) noexcept {
    const std::size_t used = session_.feed(bytes);
    if (session_.phase() == http::response_phase::failed) {
        finish_call(result<client_response>(session_.error()));
        close_now();
        return;
    }
    if (session_.holding()) {
        // The head came with the body paused: nothing of the body goes out before resume_body(),
        // not even the rest of this read, and the reader sets the pace (no response_timeout).
        try {
            held_.assign(bytes.substr(used));
        } catch (...) {
            finish_call(result<client_response>(client_errc::reset));
            close_now();
            return;
        }
        transport_.pause_receiving();
        loop_.cancel(timer_);
        return;
    }
    if (session_.phase() == http::response_phase::complete) {
        if (!request_written_ && transport_.sending()) {
            // An early answer (a 413, say) while the body still goes out: hand it over now;
            // the connection cannot be reused (the upstream stopped reading).
            finish_call(result<client_response>(std::move(call_->response)));
            close_now();
            return;
        }
        complete(used < bytes.size());
    }
}

void client_connection::complete(bool extra_bytes) noexcept {
    const bool keep = session_.keep_alive() && request_written_ && !extra_bytes && !pool_->stopped();
    finish_call(result<client_response>(std::move(call_->response)));
    // An idle connection must hear the upstream close it; a pause of the call ends with it.
    if (!keep || !reusable(loop_.now()) || transport_.resume_receiving() < 0) {
        close_now();
        return;
    }
    state_ = state::idle;
    arm(pool_->config().options.idle_timeout);
    pool_->put_idle(this);
}

void client_connection::on_peer_closed(int rc) noexcept {
    if (state_ == state::idle) {
        close_now(); // the upstream closed a pooled connection (its keep-alive timeout)
        return;
    }
    if (state_ != state::busy) {
        return;
    }
    if (session_.holding()) {
        held_close_ = rc; // after what came before it, once resume_body() hands that over
        return;
    }
    if (rc == 0 && session_.started()) {
        session_.finish(); // a close-delimited body ends here
        if (session_.phase() == http::response_phase::complete) {
            finish_call(result<client_response>(std::move(call_->response)));
            close_now();
            return;
        }
    }
    broken(rc);
}

void client_connection::broken(int rc) noexcept {
    if (state_ != state::busy || !call_) {
        return;
    }
    if (rc == -EPROTO && served_ == 1 && !session_.started() && pool_->host(address_->host).tls) {
        // A TLS 1.3 server checks the client's certificate after the client's side of the
        // handshake is done (RFC 8446 §4.4.2.4): its refusal (certificate_required, a CA it does
        // not trust) is the first thing the connection reads. It is the handshake's failure all
        // the same, as under TLS 1.2, where it ends the connect (the decorator logged why).
        finish_call(result<client_response>(client_errc::tls_handshake_failed));
        close_now();
        return;
    }
    // The retry rule (docs/client.md): once, on a fresh connection, only for a pooled
    // connection that may have gone stale while idle, when the upstream has said nothing
    // and repeating the request cannot do harm twice: an idempotent method, or provably
    // nothing written (no send in flight, none that reported bytes or a TLS partial send).
    const bool nothing_written = !request_written_ && !transport_.sending() && !transport_.may_have_written();
    const bool may_retry = from_pool_ && !session_.started() && !call_->retried &&
                           (http::is_idempotent(call_->request.method) || nothing_written);
    if (may_retry) {
        auto call = std::move(call_);
        call->conn = nullptr;
        if (transport_.sending()) {
            // This send may still read the request's memory (finish_call): the retry, whose
            // outcome lets the caller free a borrowed body, waits for op::close.
            retry_after_close_ = std::move(call);
            close_now();
            return;
        }
        auto pool = pool_;
        close_now();
        pool->retry(std::move(call));
        return;
    }
    const std::error_code e = session_.phase() == http::response_phase::failed && session_.error()
                                  ? session_.error()
                                  : std::error_code(client_errc::reset);
    finish_call(result<client_response>(e));
    close_now();
}

void client_connection::abort_call(std::error_code why) noexcept {
    if (call_) {
        finish_call(result<client_response>(why));
    }
    close_now();
}

void client_connection::finish_call(result<client_response> r) noexcept {
    if (!call_ || answer_after_close_) {
        return; // none, or its outcome is decided and waits for op::close
    }
    if (transport_.sending()) {
        // The request is still going out (an early answer, a timeout, a cancel): on io_uring the
        // kernel may read its memory until the send completes, the close's cancellation
        // notwithstanding, and a borrowed body (client_request::body_view) is the caller's to
        // free once the callback has run. Every caller closes now; the outcome is handed over
        // at op::close, after which nothing reads it (backend.h rules 4 and 7).
        answer_after_close_.emplace(std::move(r));
        return;
    }
    auto call = std::move(call_);
    call->conn = nullptr;
    pool_->deliver(call, std::move(r));
}

void client_connection::on_response_head(client_response& head) noexcept {
    head_delivered_ = true;
    // From here response_timeout bounds the silence between two reads of the body (nginx's
    // proxy_read_timeout), not the whole body, which may be long and is paced by the reader.
    arm(pool_->config().options.response_timeout);
    try {
        call_->stream->on_head(std::move(head)); // the session needs no more than its status
    } catch (...) {
        // A throwing handler cannot stop the parser here; it hears on_end like any other call.
    }
    // Paused before the head (or inside on_head): the head is in, the body waits whole.
    if (call_ && call_->body_paused.load(std::memory_order_acquire)) {
        session_.hold_body();
    }
}

void client_connection::on_response_body(std::string_view bytes) noexcept {
    if (!transport_.receiving_paused()) {
        arm(pool_->config().options.response_timeout);
    }
    try {
        call_->stream->on_body(bytes);
    } catch (...) {
    }
}

void client_connection::apply_body_pause() noexcept {
    if (state_ != state::busy || !call_ || !call_->stream) {
        return;
    }
    if (!head_delivered_) {
        // Before the head the head is read all the same, under response_timeout (an upstream
        // slow to answer is slow whatever the reader does): on_response_head reads the flag
        // and holds the body from its first byte.
        return;
    }
    if (call_->body_paused.load(std::memory_order_acquire)) {
        transport_.pause_receiving();
        // The reader holds the pace now: no timeout while we do not read (the downstream
        // side has its own timeouts and disconnect, which cancel this call).
        drain_due_ = false;
        loop_.cancel(timer_);
        return;
    }
    if (session_.holding() || held_close_ != no_close) {
        // The held body goes out from the timer: resume_body() runs no callback inline.
        drain_due_ = true;
        arm(std::chrono::milliseconds(0));
        return;
    }
    if (transport_.receiving_paused()) {
        // A failed re-arm ends the call through the timer, not inline: resume_body() promises
        // not to run the call's callbacks from inside it.
        arm(transport_.resume_receiving() < 0 ? std::chrono::milliseconds(0)
                                              : pool_->config().options.response_timeout);
    }
}

void client_connection::drain_held() noexcept {
    std::string bytes = std::move(held_);
    held_ = std::string();
    session_.release(); // a body of length 0 ends here
    consume(bytes);     // on_body, and the end if it is in there
    if (state_ != state::busy || !call_) {
        return; // the call ended (its connection pooled or closing)
    }
    if (call_->body_paused.load(std::memory_order_acquire)) {
        return; // paused again from inside on_body: the next resume_body() goes on
    }
    if (held_close_ != no_close) {
        on_peer_closed(std::exchange(held_close_, no_close));
        return;
    }
    arm(transport_.resume_receiving() < 0 ? std::chrono::milliseconds(0)
                                          : pool_->config().options.response_timeout);
}

bool client_connection::reusable(clock::time_point now) const noexcept {
    const client_options& o = pool_->config().options;
    // A refresh no longer resolves its address: the upstream behind it may be going away (a
    // rotated load balancer IP), so the connection ends with its call.
    if (address_->retired.load(std::memory_order_relaxed)) {
        return false;
    }
    if (o.max_requests_per_connection != 0 && served_ >= o.max_requests_per_connection) {
        return false;
    }
    if (o.max_connection_lifetime.count() > 0 && now >= deadline_after(created_, o.max_connection_lifetime)) {
        return false;
    }
    return true;
}

void client_connection::arm(std::chrono::milliseconds d) noexcept {
    loop_.arm(timer_, deadline_after(loop_.now(), d));
}

void client_connection::on_timer(timer& t) noexcept {
    static_cast<client_connection*>(t.ctx)->timed_out();
}

void client_connection::timed_out() noexcept {
    switch (state_) {
    case state::connecting: {
        auto call = std::move(call_);
        if (call) {
            call->conn = nullptr;
        }
        auto pool = pool_; // the pool closes this, which may free it at once
        const auto address = address_;
        pool->connect_failed(this, address, std::move(call), client_errc::connect_timed_out);
        break;
    }
    case state::busy:
        if (drain_due_) {
            drain_due_ = false;
            drain_held();
            break;
        }
        finish_call(result<client_response>(client_errc::response_timed_out));
        close_now();
        break;
    case state::idle:
        close_now();
        break;
    case state::closing:
        break;
    }
}

void client_connection::close_now() noexcept {
    if (state_ == state::closing) {
        return;
    }
    const bool was_connecting = state_ == state::connecting;
    state_ = state::closing;
    loop_.cancel(timer_);
    if (was_connecting) {
        pool_->connect_ended(); // failed, timed out, or aborted before it was connected
    }
    pool_->forget(this);
    if (transport_.is_closed()) {
        // Nothing was opened (socket() failed): no op::close will come.
        on_closed();
        return;
    }
    transport_.close();
}

void client_connection::on_closed() noexcept {
    if (retry_after_close_) {
        pool_->retry(std::move(retry_after_close_));
    }
    if (answer_after_close_ && call_) {
        auto call = std::move(call_);
        call->conn = nullptr;
        pool_->deliver(call, std::move(*answer_after_close_));
    }
    pool_->config().counters->open.fetch_sub(1, std::memory_order_relaxed);
    detail::loop& l = loop_;
    delete this;
    l.release_background();
}

} // namespace sluice::detail
