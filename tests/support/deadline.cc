#include "support/deadline.h"

#include <algorithm>
#include <climits>
#include <thread>

namespace sluice::test {

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
    const auto deadline = test_clock::now() + timeout;
    while (true) {
        if (pred()) {
            return true;
        }
        if (test_clock::now() >= deadline) {
            return pred();
        }
        // Short enough to keep tests fast, long enough not to steal a core from the server
        // on a two-core machine.
        std::this_thread::sleep_for(2ms);
    }
}

int remaining_ms(test_clock::time_point deadline) noexcept {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - test_clock::now());
    if (left.count() <= 0) {
        return 0;
    }
    // Round up so a wait never ends a hair before its deadline and spins on a zero timeout.
    return static_cast<int>(std::min<long long>(left.count() + 1, INT_MAX));
}

} // namespace sluice::test
