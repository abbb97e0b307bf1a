// Completions of sluice::async_op operations that coroutines are waiting on, held for the
// test thread to complete (from "another thread"), drop or keep. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include <sluice/async_op.h>

#include "support/deadline.h"

namespace sluice::test {

template <class T>
class completion_box {
public:
    /// An operation that parks its completion here; `cancelled` counts its canceller's runs.
    async_op<T> op() {
        return async_op<T>([this](completion<T> done) {
            done.on_cancel([this] {
                std::lock_guard lock(mu_);
                ++cancelled_;
            });
            std::lock_guard lock(mu_);
            items_.push_back(std::move(done));
        });
    }
    std::size_t size() const {
        std::lock_guard lock(mu_);
        return items_.size();
    }
    std::size_t cancelled() const {
        std::lock_guard lock(mu_);
        return cancelled_;
    }
    bool wait_for(std::size_t n, std::chrono::milliseconds timeout = default_timeout) const {
        return wait_until([&] { return size() >= n; }, timeout);
    }
    std::vector<completion<T>> take_all() {
        std::lock_guard lock(mu_);
        return std::exchange(items_, {});
    }

private:
    mutable std::mutex mu_;
    std::vector<completion<T>> items_;
    std::size_t cancelled_ = 0;
};

} // namespace sluice::test
