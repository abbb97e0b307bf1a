#include <stdexcept>

#include <sluice/exchange.h>

#include "exchange/exchange_access.h"
#include "http/request_builder.h"

namespace sluice {

std::string exchange::take_body() noexcept {
    return detail::request_builder(request_).take_body();
}

exchange::~exchange() {
    if (async_ != nullptr) {
        async_->detach();
        async_->release();
    }
}

async_context exchange::start_async() {
    return start_async(std::chrono::milliseconds(default_timeout_ms_));
}

async_context exchange::start_async(std::chrono::milliseconds timeout) {
    if (host_ == nullptr) {
        throw std::logic_error("start_async: the exchange is not being dispatched");
    }
    if (timeout.count() < 0) {
        throw std::invalid_argument("start_async: negative timeout");
    }
    if (async_ == nullptr) {
        async_ = new detail::async_state(detail::exchange_access::port(*this), host_, generation_);
    }
    if (!async_->start(timeout)) {
        throw std::logic_error("start_async: the exchange has already ended");
    }
    async_started_ = true;
    async_->retain();
    return async_context(async_);
}

async_context exchange::context() const noexcept {
    if (async_ == nullptr) {
        return {};
    }
    async_->retain();
    return async_context(async_);
}

void exchange::set_attribute(std::string name, std::any value) {
    if (async_ == nullptr) {
        // Attributes live in the async state so that handles see them too; a sync exchange
        // that uses attributes pays for one small allocation.
        async_ = new detail::async_state(detail::exchange_access::port(*this), host_, generation_);
    }
    async_->set_attribute(std::move(name), std::move(value));
}

std::any exchange::attribute_any(std::string_view name) const {
    return async_ == nullptr ? std::any{} : async_->attribute(name);
}

} // namespace sluice
