#include "server/loop_context.h"

#include "access_log/access_format.h"
#include "access_log/access_log.h"
#include "exchange/exchange_access.h"
#include "server/connection.h"

namespace sluice::detail {

namespace {
// Pools keep what steady state needs and let spikes go: past these, objects are freed.
constexpr std::size_t max_free_slots = 4096;
constexpr std::size_t max_free_buffers = 4096;
constexpr std::size_t buffer_capacity = 4096;
constexpr std::size_t max_pooled_buffer = std::size_t{256} * 1024;
constexpr std::size_t max_pooled_body = std::size_t{64} * 1024;
} // namespace

loop_context::loop_context(detail::loop& l, server_context& s) : loop(l), server(s) {
    if (server.collect_metrics) {
        metrics = std::make_unique<request_metrics>(server.routes.size());
    }
    if (server.access != nullptr) {
        access = server.access->queue(loop.index());
    }
}

loop_context::~loop_context() = default;

void loop_context::record(request_slot& s, int status, std::size_t body_bytes) noexcept {
    // Read once, here and not per request at dispatch: a keep-alive connection's next request
    // starts at its first byte (acquire_slot), which is the time a client waits for.
    const auto duration = std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - s.started);
    const sluice::request& req = exchange_access::request(s.ex);
    if (metrics) {
        metrics->observe(s.route, req.method(), status, duration);
    }
    if (access == nullptr) {
        return;
    }
    std::string* line = access->reserve();
    if (line == nullptr) {
        return; // the writer is behind: dropped and counted, the loop never waits
    }
    access_record r;
    r.remote = req.remote_address();
    r.method = req.method();
    r.target = req.target();
    r.version = req.version();
    r.status = status;
    r.body_bytes = body_bytes;
    r.referer = req.header("Referer").value_or(std::string_view());
    r.user_agent = req.header("User-Agent").value_or(std::string_view());
    r.time = std::chrono::system_clock::now();
    r.duration = duration;
    try {
        append_access_line(*line, r, server.access->format());
    } catch (const std::bad_alloc&) {
        line->clear(); // an empty line is written as nothing
    }
    access->commit();
}

std::unique_ptr<request_slot> loop_context::take_slot() {
    if (free_slots_.empty()) {
        const auto& l = server.cfg.limits;
        return std::make_unique<request_slot>(http::session_limits{l.max_header_bytes, l.max_body_bytes});
    }
    auto s = std::move(free_slots_.back());
    free_slots_.pop_back();
    return s;
}

void loop_context::give_slot(std::unique_ptr<request_slot> s) noexcept {
    // An exchange that carried a big body keeps that capacity: free it rather than pool it.
    if (free_slots_.size() >= max_free_slots || s->ex.request().body().size() > max_pooled_body ||
        s->ex.response().body().capacity() > max_pooled_body) {
        return; // the exchange's destructor lets go of its async state
    }
    exchange_access::reset(s->ex);
    s->session.reset();
    s->handler = nullptr;
    try {
        free_slots_.push_back(std::move(s));
    } catch (const std::bad_alloc&) {
    }
}

buffer loop_context::take_buffer() {
    if (free_buffers_.empty()) {
        auto b = std::make_unique<std::string>();
        b->reserve(buffer_capacity);
        return b;
    }
    buffer b = std::move(free_buffers_.back());
    free_buffers_.pop_back();
    return b;
}

void loop_context::give_buffer(buffer& b) noexcept {
    if (!b) {
        return;
    }
    buffer owned = std::move(b);
    if (free_buffers_.size() >= max_free_buffers || owned->capacity() > max_pooled_buffer) {
        return;
    }
    owned->clear();
    try {
        free_buffers_.push_back(std::move(owned));
    } catch (const std::bad_alloc&) {
    }
}

void loop_context::note_refused() noexcept {
    counters.add(counters.refused, 1);
    ++refused_unlogged_;
    const auto now = loop.now();
    if (now - refused_logged_at_ >= std::chrono::seconds(1)) {
        server.log.warn("limits.max_connections ({}) reached: refused {} connection{} since the last report",
                        server.cfg.limits.max_connections, refused_unlogged_,
                        refused_unlogged_ == 1 ? "" : "s");
        refused_unlogged_ = 0;
        refused_logged_at_ = now;
    }
}

void loop_context::begin_shutdown() {
    shutting_down_ = true;
    // Each step may close (and so remove) connections: iterate over copies.
    auto each = [this](void (connection::*step)() noexcept) {
        auto conns = connections_;
        for (connection* c : conns) {
            (c->*step)();
        }
    };
    each(&connection::shutdown);
    auto expire = [this, each] {
        drain_over_ = true;
        each(&connection::end_for_shutdown);
        // A response the client does not read would hold the loop until the write timeout.
        loop.call_after(std::chrono::seconds(1), [this] { sweep_after_drain(); });
    };
    // Armed also when no connection is here yet: on io_uring an accept the kernel completed
    // before the listener's cancellation reaches the loop after this, and a hand-over keeps
    // that connection to read its request (listener.cc). A timer does not keep the loop alive.
    if (server.cfg.shutdown_timeout_ms == 0) {
        expire();
    } else {
        loop.call_after(std::chrono::milliseconds(server.cfg.shutdown_timeout_ms), expire);
    }
}

void loop_context::sweep_after_drain() {
    auto conns = connections_;
    for (connection* c : conns) {
        c->close_for_shutdown();
    }
    if (!connections_.empty()) {
        // Handlers that workers still run: each one's response gets until the next sweep.
        loop.call_after(std::chrono::seconds(1), [this] { sweep_after_drain(); });
    }
}

void loop_context::add(connection* c) {
    c->slot = static_cast<std::uint32_t>(connections_.size());
    connections_.push_back(c);
}

void loop_context::remove(connection* c) noexcept {
    connection* last = connections_.back();
    connections_[c->slot] = last;
    last->slot = c->slot;
    connections_.pop_back();
}

} // namespace sluice::detail
