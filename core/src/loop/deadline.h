// Deadlines computed from "now": the one place where a timeout is added to a time point.
//
// A timeout may be anything a caller passes (set_timeout(milliseconds::max()), post_after of
// years): adding it to a steady_clock time point converts it to nanoseconds and overflows a
// signed 64-bit count (undefined behaviour; in practice a deadline in the past that fires at
// once). Past the end of the clock's range the deadline saturates: "never".
#pragma once

#include <chrono>

#include "loop/timer_heap.h"

namespace sluice::detail {

/// now + d, saturated to clock::time_point::max(); a negative d is now.
inline clock::time_point deadline_after(clock::time_point now, std::chrono::milliseconds d) noexcept {
    if (d <= std::chrono::milliseconds::zero()) {
        return now;
    }
    // Compared in milliseconds, which hold any time left on the clock without overflow.
    const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock::time_point::max() - now);
    if (d >= room) {
        return clock::time_point::max();
    }
    return now + d;
}

} // namespace sluice::detail
