#include "support/context_box.h"

namespace sluice::test {

void context_box::add(async_context ctx) {
    std::lock_guard lock(mu_);
    items_.push_back(std::move(ctx));
}

std::size_t context_box::size() const {
    std::lock_guard lock(mu_);
    return items_.size();
}

bool context_box::wait_for(std::size_t n, std::chrono::milliseconds timeout) const {
    return wait_until([&] { return size() >= n; }, timeout);
}

async_context context_box::at(std::size_t i) const {
    std::lock_guard lock(mu_);
    return i < items_.size() ? items_[i] : async_context{};
}

std::vector<async_context> context_box::take_all() {
    std::lock_guard lock(mu_);
    std::vector<async_context> out;
    out.swap(items_);
    return out;
}

} // namespace sluice::test
