#include "server/loop_context.h"

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

loop_context::~loop_context() = default;

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
    // Each step may close (and so remove) connections: iterate over copies.
    auto each = [this](void (connection::*step)() noexcept) {
        auto conns = connections_;
        for (connection* c : conns) {
            (c->*step)();
        }
    };
    each(&connection::shutdown);
    auto expire = [this, each] {
        each(&connection::end_for_shutdown);
        // A response the client does not read would hold the loop until the write timeout.
        loop.call_after(std::chrono::seconds(1), [each] { each(&connection::close_for_shutdown); });
    };
    if (connections_.empty()) {
        return;
    }
    if (server.cfg.shutdown_timeout_ms == 0) {
        expire();
    } else {
        loop.call_after(std::chrono::milliseconds(server.cfg.shutdown_timeout_ms), expire);
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
