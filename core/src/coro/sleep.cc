#include <algorithm>

#include <sluice/sleep.h>

namespace sluice {

async_op<void> sleep_for(const executor& loop, std::chrono::milliseconds delay) {
    delay = std::max(delay, std::chrono::milliseconds(0));
    return async_op<void>([loop, delay](completion<void> done) {
        // A loop timer cannot be withdrawn: on cancellation it stays armed and its completion,
        // which the await has settled meanwhile, is ignored when it fires.
        if (!loop.post_after(delay, [done] { done(); })) {
            done(std::make_error_code(std::errc::operation_canceled)); // the loop has stopped
        }
    });
}

} // namespace sluice
