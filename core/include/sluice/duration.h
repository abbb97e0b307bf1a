// Durations of any unit turned into the milliseconds that sluice's timers count, without
// overflow: sleep_for, start_async, set_timeout and post_after take any std::chrono duration.
//
// std::chrono::ceil<milliseconds>(seconds::max()) multiplies by 1000 in 64 bits and wraps (in
// practice to a negative count: a sleep that returns at once, a timeout refused), and a floating
// duration past the range converts with undefined behaviour. Here a duration too large for
// milliseconds saturates to milliseconds::max() (milliseconds::min() below), which the timers
// read as "never" (deadline_after, core/src/loop/deadline.h); it is rounded up otherwise, so
// a timer never fires early. A NaN is zero.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ratio>
#include <type_traits>
#include <utility>

namespace sluice::detail {

template <class Rep, class Period>
std::chrono::milliseconds saturating_ceil_ms(std::chrono::duration<Rep, Period> d) noexcept {
    using ms = std::chrono::milliseconds;
    using factor = std::ratio_divide<Period, std::milli>; // milliseconds per unit of d, reduced
    constexpr auto max = std::numeric_limits<ms::rep>::max();
    constexpr auto min = std::numeric_limits<ms::rep>::min();
    if constexpr (std::is_floating_point_v<Rep>) {
        const Rep x = std::chrono::duration<Rep, std::milli>(d).count(); // as std::chrono computes it
        if (std::isnan(x)) {
            return ms::zero();
        }
        // static_cast<Rep>(max) is 2^63 for float and double (rounded up) and exact for an 80-bit
        // long double: a value below it converts back without overflow.
        if (x >= static_cast<Rep>(max)) {
            return ms::max();
        }
        if (x <= static_cast<Rep>(min)) {
            return ms::min();
        }
        return ms(static_cast<ms::rep>(std::ceil(x)));
    } else if constexpr (std::is_integral_v<Rep>) {
        // std::chrono computes count * num / den, and ceil compares d with the result in their
        // common unit, which is the same product count * num: both are exact while that fits.
        const auto count = +d.count(); // promoted: std::cmp_* take no character types
        if constexpr (factor::num == 1) {
            // A division: only an unsigned count can end at or above the range (and at max, the
            // rounding up would step past it).
            using wide = std::common_type_t<decltype(count), std::intmax_t>;
            if (std::cmp_greater_equal(static_cast<wide>(count) / static_cast<wide>(factor::den), max)) {
                return ms::max();
            }
        } else if (std::cmp_greater(count, max / factor::num) || std::cmp_less(count, min / factor::num)) {
            if constexpr (factor::den == 1) {
                // A whole number of milliseconds per unit (seconds, hours, years): the result is
                // out of range exactly when the product is.
                return std::cmp_greater(count, 0) ? ms::max() : ms::min();
            } else {
                // An odd unit (1.000001 ms): the product overflows, the result may not.
                const long double x = static_cast<long double>(count) *
                                      static_cast<long double>(factor::num) /
                                      static_cast<long double>(factor::den);
                if (x >= static_cast<long double>(max)) {
                    return ms::max();
                }
                if (x <= static_cast<long double>(min)) {
                    return ms::min();
                }
                return ms(static_cast<ms::rep>(std::ceil(x)));
            }
        }
        return std::chrono::ceil<ms>(d);
    } else {
        return std::chrono::ceil<ms>(d); // a class type as Rep: its own arithmetic decides
    }
}

/// A timeout's milliseconds, as saturating_ceil_ms rounds them, except that a negative duration
/// stays negative, which start_async and set_timeout refuse: rounded up, one above -1 ms would
/// be 0, "no timeout".
template <class Rep, class Period>
std::chrono::milliseconds timeout_ceil_ms(std::chrono::duration<Rep, Period> d) noexcept {
    if (d < std::chrono::duration<Rep, Period>::zero()) {
        return std::chrono::milliseconds(-1);
    }
    return saturating_ceil_ms(d);
}

} // namespace sluice::detail
