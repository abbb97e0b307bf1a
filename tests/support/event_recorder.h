// Records async listener events (on_timeout / on_error / on_complete) from whatever thread
// runs them, so tests can check their order and that each fires exactly once.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <sluice/async_context.h>

#include "support/deadline.h"

namespace sluice::test {

class event_recorder {
public:
    struct event {
        async_event_kind kind;
        std::error_code error;
    };

    /// Registers on_timeout, on_error and on_complete listeners on ctx that record here. The
    /// listeners share the record, so they may outlive this object.
    void attach(async_context& ctx);
    void record(const async_event& ev);
    void clear();

    std::vector<event> events() const;
    std::size_t count(async_event_kind kind) const;
    /// "timeout,complete" — the kinds in order, for readable assertions.
    std::string sequence() const;
    /// Waits until at least n events were recorded.
    bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout = default_timeout) const;

private:
    struct shared {
        mutable std::mutex mu;
        std::vector<event> events;
    };
    std::shared_ptr<shared> s_ = std::make_shared<shared>();
};

const char* kind_name(async_event_kind k) noexcept;

} // namespace sluice::test
