// sluice::client: the three call styles over one submission path (client_core::start).
#include <future>

#include <sluice/client.h>
#include <sluice/request.h>

#include "client/body_stream_state.h"
#include "client/client_connection.h"
#include "client/client_core.h"
#include "exchange/exchange_access.h"
#include "tls/client_tls_context.h"

namespace sluice {

namespace {

using detail::client_call_state;
using detail::client_core;
using detail::loop_port;

// Where a call runs: the caller's loop when it is a reactor, else the client's own loop.
std::shared_ptr<loop_port> run_port(client_core& core, const executor& on) {
    const std::shared_ptr<loop_port>& port = detail::exchange_access::port(on);
    if (port && !port->serves_one_connection()) {
        return port;
    }
    return core.own_port();
}

// Starts a call whose outcome goes to `deliver` (on the run loop). Delivers cancelled on the
// calling thread when no loop takes it.
client_call start_call(client_core& core, const executor& on, client_request request,
                       client_call_state::deliver_fn deliver,
                       std::shared_ptr<client_stream_handler> stream = nullptr) {
    auto call = std::make_shared<client_call_state>(std::move(request), std::move(deliver));
    call->stream = std::move(stream);
    const std::shared_ptr<loop_port> port = run_port(core, on);
    if (!port || !core.start(port, call)) {
        if (!call->finished.exchange(true)) {
            call->deliver(result<client_response>(client_errc::cancelled));
        }
        return client_call(call);
    }
    return client_call(call);
}

} // namespace

std::optional<std::string_view> client_response::header(std::string_view name) const noexcept {
    for (const auto& h : headers) {
        if (iequals(h.name, name)) {
            return std::string_view(h.value);
        }
    }
    return std::nullopt;
}

bool client_call::cancel() const noexcept {
    if (!state_ || state_->finished.load(std::memory_order_acquire) ||
        state_->cancel_requested.exchange(true, std::memory_order_acq_rel)) {
        return false;
    }
    const std::shared_ptr<loop_port>& port = state_->port;
    if (!port) {
        return false;
    }
    try {
        // The pool of the call's loop finds it, waiting or on a connection (pool_for only looks
        // the pool up: the call's pool exists once the call has reached the loop).
        return port->post([s = state_] {
            auto* pool = s->pool;
            if (pool != nullptr) {
                pool->cancel(s);
            } else if (s->conn != nullptr) {
                s->conn->abort_call(client_errc::cancelled);
            }
        });
    } catch (...) {
        return false;
    }
}

namespace {

// Applies pause_body() / resume_body() on the call's loop: at once when already there (so a
// pause from inside on_body stops the next read), else posted.
void apply_pause(const std::shared_ptr<client_call_state>& s, bool paused) noexcept {
    if (!s || !s->stream || s->finished.load(std::memory_order_acquire)) {
        return;
    }
    s->body_paused.store(paused, std::memory_order_release);
    const std::shared_ptr<loop_port>& port = s->port;
    if (!port) {
        return;
    }
    auto apply = [s] {
        if (s->conn != nullptr) {
            s->conn->apply_body_pause();
        }
    };
    if (port->in_owner_thread()) {
        apply();
        return;
    }
    try {
        (void)port->post(std::move(apply));
    } catch (...) {
        // Out of memory: the pause is lost; response_timeout still bounds the call.
    }
}

} // namespace

void client_call::pause_body() const noexcept {
    apply_pause(state_, true);
}

void client_call::resume_body() const noexcept {
    apply_pause(state_, false);
}

client::client(upstream target, client_options options)
    : core_(std::make_shared<detail::client_core>(std::move(target), options)) {}

client::~client() {
    core_->shutdown();
}

client_call client::send(const executor& on, client_request request, client_callback done) {
    executor target = on;
    if (!target) {
        const auto own = core_->own_port();
        if (own) {
            target = executor(own);
        }
    }
    auto deliver = [target, done = std::move(done)](result<client_response> r) mutable {
        // Posted, never inline: the callback runs on its loop after the client's own work.
        (void)target.post([done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    };
    return start_call(*core_, on, std::move(request), std::move(deliver));
}

async_op<client_response> client::async_send(const executor& on, client_request request) {
    return async_op<client_response>(
        [core = core_, on, request = std::move(request)](completion<client_response> done) mutable {
            client_call call = start_call(*core, on, std::move(request),
                                          [done](result<client_response> r) { done(std::move(r)); });
            // The exchange ended first: the upstream connection is closed, nothing waits.
            done.on_cancel([call] { call.cancel(); });
        });
}

namespace {

client_call start_streamed(client_core& core, const executor& on, client_request request,
                           client_stream_handler handler) {
    auto h = std::make_shared<client_stream_handler>(std::move(handler));
    // Inline on the call's loop, after the last on_body: the pieces were lent, so the handler
    // runs where they arrive, and its end must not overtake them. A plain pointer: the call's
    // state holds both the handler (stream) and this (deliver), and runs this through its own
    // shared_ptr (client_pool::deliver), so the handler outlives every run of it.
    auto deliver = [h = h.get()](const result<client_response>& r) {
        if (h->on_end) {
            h->on_end(r ? std::error_code{} : r.error());
        }
        // Drop what the handler captured (an exchange's context) once the call has ended.
        *h = client_stream_handler{};
    };
    if (!h->on_head) {
        h->on_head = [](const client_response&) {};
    }
    if (!h->on_body) {
        h->on_body = [](std::string_view) {};
    }
    return start_call(core, on, std::move(request), std::move(deliver), h);
}

} // namespace

client_call client::send_streaming(const executor& on, client_request request,
                                   client_stream_handler handler) {
    return start_streamed(*core_, on, std::move(request), std::move(handler));
}

async_op<client_body_stream> client::stream(const executor& on, client_request request) {
    return async_op<client_body_stream>(
        [core = core_, on, request = std::move(request)](completion<client_body_stream> done) mutable {
            auto s = std::make_shared<detail::body_stream_state>(done);
            client_call call = start_streamed(*core, on, std::move(request), s->handler());
            s->set_call(call);
            // The exchange ended before the head: the upstream connection is closed, nothing waits.
            done.on_cancel([call] { call.cancel(); });
        });
}

result<client_response> client::send_blocking(client_request request) {
    const auto own = core_->own_port();
    if (own && own->in_owner_thread()) {
        // Waiting here would stop the very loop that must run the call.
        return result<client_response>(std::make_error_code(std::errc::resource_deadlock_would_occur));
    }
    auto p = std::make_shared<std::promise<result<client_response>>>();
    auto fut = p->get_future();
    start_call(*core_, executor{}, std::move(request),
               [p](result<client_response> r) { p->set_value(std::move(r)); });
    return fut.get();
}

client_stats client::stats() const noexcept {
    const auto& c = *core_->counters;
    client_stats s;
    s.connects = c.connects.load(std::memory_order_relaxed);
    s.reused = c.reused.load(std::memory_order_relaxed);
    s.retried = c.retried.load(std::memory_order_relaxed);
    s.completed = c.completed.load(std::memory_order_relaxed);
    s.failed = c.failed.load(std::memory_order_relaxed);
    // Gauges summed over loops may dip below zero for a moment (one loop's decrement seen
    // before another's increment): clamped.
    auto gauge = [](const std::atomic<std::int64_t>& g) {
        const auto v = g.load(std::memory_order_relaxed);
        return v > 0 ? static_cast<std::size_t>(v) : std::size_t{0};
    };
    s.open = gauge(c.open);
    s.idle = gauge(c.idle);
    s.pending = gauge(c.pending);
    for (std::size_t i = 0; i < client_errc_count; ++i) {
        s.failed_by_kind[i] = c.failed_by_kind[i].load(std::memory_order_relaxed);
    }
    if (const auto tls = core_->tls()) {
        s.tls_handshakes = tls->handshakes();
        s.tls_resumed = tls->resumed();
    }
    return s;
}

const client_options& client::options() const noexcept {
    return core_->options;
}

} // namespace sluice
