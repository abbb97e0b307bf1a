#include "support/fake_dns.h"

#include <stdexcept>

namespace sluice::test {

std::function<std::vector<std::string>(std::string_view, std::uint16_t)> fake_dns::function() {
    return [self = shared_from_this()](std::string_view, std::uint16_t) { return self->lookup(); };
}

void fake_dns::answer(std::vector<std::string> a) {
    std::lock_guard lock(mu_);
    answer_ = std::move(a);
}

void fake_dns::fail(bool f) {
    std::lock_guard lock(mu_);
    fail_ = f;
}

void fake_dns::block(bool b) {
    {
        std::lock_guard lock(mu_);
        block_ = b;
    }
    cv_.notify_all();
}

int fake_dns::lookups() const {
    std::lock_guard lock(mu_);
    return lookups_;
}

bool fake_dns::blocked_now() const {
    std::lock_guard lock(mu_);
    return blocked_now_;
}

std::vector<std::string> fake_dns::lookup() {
    std::unique_lock lock(mu_);
    ++lookups_;
    if (block_) {
        blocked_now_ = true;
        const bool released = cv_.wait_for(lock, hang_limit, [this] { return !block_; });
        blocked_now_ = false;
        if (!released) {
            throw std::runtime_error("fake_dns: still blocked after hang_limit");
        }
    }
    if (fail_) {
        throw std::runtime_error("fake_dns: NXDOMAIN");
    }
    return answer_;
}

} // namespace sluice::test
