// The core's hands on an exchange (a friend of sluice::exchange): the connection
// prepares it before a dispatch and reads what the handler left after.
#pragma once

#include <sluice/exchange.h>

#include "exchange/async_state.h"

namespace sluice::detail {

class exchange_access {
public:
    static sluice::request& request(exchange& ex) noexcept { return ex.request_; }

    /// Binds a fresh exchange to its loop and host for one request.
    static void bind(exchange& ex, const sluice::executor& exec, async_host* host, std::uint64_t generation,
                     std::uint32_t default_timeout_ms) {
        if (ex.executor_.port_ != exec.port_) {
            ex.executor_ = exec; // pooled exchanges stay on their loop: no ref-count traffic per request
        }
        ex.host_ = host;
        ex.generation_ = generation;
        ex.default_timeout_ms_ = default_timeout_ms;
    }

    /// Before each dispatch of the handler (the first and every resumed one).
    static void begin_dispatch(exchange& ex) noexcept {
        ++ex.dispatches_;
        ex.async_started_ = false;
    }

    /// The limiter re-dispatches a request that waited for a permit: to the handler it guards,
    /// that dispatch is the first (is_initial() == true), as if the request had not waited.
    static void restart_dispatches(exchange& ex) noexcept { ex.dispatches_ = 1; }

    static async_state* state(const exchange& ex) noexcept { return ex.async_; }
    static std::uint64_t generation(const exchange& ex) noexcept { return ex.generation_; }
    static const std::shared_ptr<loop_port>& port(const exchange& ex) noexcept { return ex.executor_.port_; }
    static const std::shared_ptr<loop_port>& port(const sluice::executor& e) noexcept { return e.port_; }

    /// Back to empty for the next request; drops the async state reference (the state itself
    /// lives on while handles exist, detached).
    static void reset(exchange& ex) noexcept {
        if (ex.async_ != nullptr) {
            ex.async_->detach();
            ex.async_->release();
            ex.async_ = nullptr;
        }
        ex.request_.clear();
        ex.response_.clear();
        ex.host_ = nullptr;
        ex.dispatches_ = 0;
        ex.async_started_ = false;
    }
};

} // namespace sluice::detail
