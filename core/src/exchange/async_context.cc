#include <sluice/async_context.h>

#include "exchange/async_state.h"

namespace sluice {

async_context::async_context(const async_context& other) noexcept : state_(other.state_) {
    if (state_ != nullptr) {
        state_->retain();
    }
}

async_context::async_context(async_context&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}

async_context& async_context::operator=(const async_context& other) noexcept {
    if (this != &other) {
        async_context copy(other);
        std::swap(state_, copy.state_);
    }
    return *this;
}

async_context& async_context::operator=(async_context&& other) noexcept {
    if (this != &other) {
        async_context moved(std::move(other));
        std::swap(state_, moved.state_);
    }
    return *this;
}

async_context::~async_context() {
    if (state_ != nullptr) {
        state_->release();
    }
}

bool async_context::complete() noexcept {
    return state_ != nullptr && state_->complete(std::nullopt);
}

bool async_context::complete(response r) noexcept {
    return state_ != nullptr && state_->complete(std::move(r));
}

bool async_context::resume() noexcept {
    return state_ != nullptr && state_->resume();
}

bool async_context::set_timeout(std::chrono::milliseconds timeout) noexcept {
    return state_ != nullptr && state_->set_timeout(timeout);
}

bool async_context::set_timeout_status(int status) noexcept {
    return state_ != nullptr && state_->set_timeout_status(status);
}

bool async_context::on_timeout(async_listener l) {
    return state_ != nullptr && state_->add_listener(async_event_kind::timeout, std::move(l));
}

bool async_context::on_error(async_listener l) {
    return state_ != nullptr && state_->add_listener(async_event_kind::error, std::move(l));
}

bool async_context::on_complete(async_listener l) {
    return state_ != nullptr && state_->add_listener(async_event_kind::complete, std::move(l));
}

bool async_context::on_drained(std::function<void()> fn) {
    return state_ != nullptr && state_->set_drain_callback(std::move(fn));
}

void async_context::set_attribute(std::string name, std::any value) {
    if (state_ != nullptr) {
        state_->set_attribute(std::move(name), std::move(value));
    }
}

std::any async_context::attribute_any(std::string_view name) const {
    return state_ == nullptr ? std::any{} : state_->attribute(name);
}

bool async_context::is_done() const noexcept {
    return state_ == nullptr || state_->is_done();
}

} // namespace sluice
