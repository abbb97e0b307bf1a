// co_await sluice::sleep_for(ex, 3s): a loop timer as an awaitable; no thread sleeps.
//
// Gives an empty std::error_code when the time has passed, std::errc::operation_canceled
// when the exchange ended first (the coroutine is then resumed at once, and the timer is
// withdrawn from its loop) or the loop has stopped.
#pragma once

#include <chrono>

#include <sluice/async_op.h>
#include <sluice/duration.h>
#include <sluice/exchange.h>
#include <sluice/executor.h>

namespace sluice {

/// Waits on the given loop's timers (it should be the exchange's: the coroutine resumes there).
/// milliseconds::max() waits until the exchange ends (the loop timers saturate).
async_op<void> sleep_for(const executor& loop, std::chrono::milliseconds delay);

/// Waits on the exchange's loop.
inline async_op<void> sleep_for(const exchange& ex, std::chrono::milliseconds delay) {
    return sleep_for(ex.executor(), delay);
}

/// Any duration, rounded up to whole milliseconds (the loop timers' resolution). One too long
/// for milliseconds (seconds::max(), 1e300 s as a double) waits until the exchange ends: it
/// saturates, never wraps into a sleep that returns at once (duration.h).
template <class Rep, class Period>
async_op<void> sleep_for(const executor& loop, std::chrono::duration<Rep, Period> delay) {
    return sleep_for(loop, detail::saturating_ceil_ms(delay));
}

template <class Rep, class Period>
async_op<void> sleep_for(const exchange& ex, std::chrono::duration<Rep, Period> delay) {
    return sleep_for(ex.executor(), detail::saturating_ceil_ms(delay));
}

} // namespace sluice
