#include "support/event_recorder.h"

namespace sluice::test {

const char* kind_name(async_event_kind k) noexcept {
    switch (k) {
    case async_event_kind::timeout:
        return "timeout";
    case async_event_kind::error:
        return "error";
    case async_event_kind::complete:
        return "complete";
    }
    return "?";
}

void event_recorder::attach(async_context& ctx) {
    auto rec = [s = s_](const async_event& ev) {
        std::lock_guard lock(s->mu);
        s->events.push_back({ev.kind, ev.error});
    };
    ctx.on_timeout(rec);
    ctx.on_error(rec);
    ctx.on_complete(rec);
}

void event_recorder::record(const async_event& ev) {
    std::lock_guard lock(s_->mu);
    s_->events.push_back({ev.kind, ev.error});
}

void event_recorder::clear() {
    std::lock_guard lock(s_->mu);
    s_->events.clear();
}

std::vector<event_recorder::event> event_recorder::events() const {
    std::lock_guard lock(s_->mu);
    return s_->events;
}

std::size_t event_recorder::count(async_event_kind kind) const {
    std::lock_guard lock(s_->mu);
    std::size_t n = 0;
    for (const auto& e : s_->events) {
        if (e.kind == kind) {
            ++n;
        }
    }
    return n;
}

std::string event_recorder::sequence() const {
    std::lock_guard lock(s_->mu);
    std::string s;
    for (const auto& e : s_->events) {
        if (!s.empty()) {
            s += ',';
        }
        s += kind_name(e.kind);
    }
    return s;
}

bool event_recorder::wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const {
    return wait_until(
        [&] {
            std::lock_guard lock(s_->mu);
            return s_->events.size() >= n;
        },
        timeout);
}

} // namespace sluice::test
