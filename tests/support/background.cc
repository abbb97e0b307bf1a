#include "support/background.h"

namespace sluice::test {

void background::run(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(fn));
}

void background::join() {
    while (true) {
        std::vector<std::thread> batch;
        {
            std::lock_guard lock(mu_);
            batch.swap(threads_);
        }
        if (batch.empty()) {
            return;
        }
        for (auto& t : batch) {
            t.join();
        }
    }
}

} // namespace sluice::test
