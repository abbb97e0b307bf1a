#include "server/loop_context.h"

#include "exchange/exchange_access.h"
#include "server/connection.h"

namespace sluice::detail {

namespace {
// Pools keep what steady state needs and let spikes go: past these, objects are freed.
constexpr std::size_t max_free_exchanges = 4096;
constexpr std::size_t max_free_buffers = 4096;
constexpr std::size_t buffer_capacity = 4096;
constexpr std::size_t max_pooled_buffer = 256 * 1024;
constexpr std::size_t max_pooled_body = 64 * 1024;
} // namespace

loop_context::~loop_context() = default;

std::unique_ptr<exchange> loop_context::take_exchange() {
    if (free_exchanges_.empty()) {
        return std::make_unique<exchange>();
    }
    auto ex = std::move(free_exchanges_.back());
    free_exchanges_.pop_back();
    return ex;
}

void loop_context::give_exchange(std::unique_ptr<exchange> ex) noexcept {
    // An exchange that carried a big body keeps that capacity: free it rather than pool it.
    if (free_exchanges_.size() >= max_free_exchanges || ex->request().body().size() > max_pooled_body ||
        ex->response().body().capacity() > max_pooled_body) {
        return;
    }
    try {
        free_exchanges_.push_back(std::move(ex));
    } catch (const std::bad_alloc&) {
    }
}

std::string loop_context::take_buffer() {
    if (free_buffers_.empty()) {
        std::string b;
        b.reserve(buffer_capacity);
        return b;
    }
    std::string b = std::move(free_buffers_.back());
    free_buffers_.pop_back();
    return b;
}

void loop_context::give_buffer(std::string& b) noexcept {
    if (b.capacity() <= 15) {
        return; // nothing worth keeping (small-string storage)
    }
    std::string owned = std::move(b);
    b = std::string(); // the giver holds no capacity any more
    if (free_buffers_.size() >= max_free_buffers || owned.capacity() > max_pooled_buffer) {
        return;
    }
    owned.clear();
    try {
        free_buffers_.push_back(std::move(owned));
    } catch (const std::bad_alloc&) {
    }
}

void loop_context::note_refused() noexcept {
    ++refused_unlogged_;
    const auto now = loop.now();
    if (now - refused_logged_at_ >= std::chrono::seconds(1)) {
        server.log.warn("limits.max_connections ({}) reached: refused {} connection{} in the last second",
                        server.cfg.limits.max_connections, refused_unlogged_, refused_unlogged_ == 1 ? "" : "s");
        refused_unlogged_ = 0;
        refused_logged_at_ = now;
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
