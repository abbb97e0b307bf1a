// detail::saturating_ceil_ms: any std::chrono duration to the milliseconds sluice's timers
// count, rounded up, saturating instead of wrapping (UBSan, in the asan preset, checks that no
// conversion overflows on the way).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <ratio>

#include <sluice/duration.h>

namespace sluice::detail {
namespace {

using ms = std::chrono::milliseconds;
using std::chrono::duration;

TEST(saturating_ceil_ms, rounds_up_to_whole_milliseconds_in_range) {
    EXPECT_EQ(saturating_ceil_ms(ms(42)), ms(42));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::hours(2)), ms(7'200'000));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::nanoseconds(1)), ms(1));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::nanoseconds(1'000'000)), ms(1));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::microseconds(1'001)), ms(2));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::microseconds(-1'500)), ms(-1));
    EXPECT_EQ(saturating_ceil_ms(std::chrono::nanoseconds::max()), ms(9'223'372'036'855));
    EXPECT_EQ(saturating_ceil_ms(duration<double>(0.0015)), ms(2));
    EXPECT_EQ(saturating_ceil_ms(duration<double>(0.001)), ms(1)) << "as std::chrono::ceil rounds it";
    EXPECT_EQ(saturating_ceil_ms(duration<float, std::milli>(2.5F)), ms(3));
    EXPECT_EQ(saturating_ceil_ms(duration<int, std::ratio<1, 3>>(1)), ms(334));
    EXPECT_EQ(saturating_ceil_ms(duration<unsigned char, std::ratio<1>>(255)), ms(255'000));
    EXPECT_EQ(
        saturating_ceil_ms(duration<std::uint64_t, std::micro>(std::numeric_limits<std::uint64_t>::max())),
        ms(18'446'744'073'709'552));
}

TEST(saturating_ceil_ms, coarse_units_past_the_range_saturate_instead_of_wrapping) {
    // ceil<milliseconds>(seconds::max()) multiplies by 1000 and wraps to -1000.
    EXPECT_EQ(saturating_ceil_ms(std::chrono::seconds::max()), ms::max());
    EXPECT_EQ(saturating_ceil_ms(std::chrono::hours::max()), ms::max());
    EXPECT_EQ(saturating_ceil_ms(std::chrono::seconds::min()), ms::min());
    EXPECT_EQ(saturating_ceil_ms(std::chrono::hours::min()), ms::min());
    EXPECT_EQ(saturating_ceil_ms(std::chrono::seconds(std::numeric_limits<std::int64_t>::max() / 1000)),
              ms(std::numeric_limits<std::int64_t>::max() / 1000 * 1000))
        << "the largest count that fits is exact";
    EXPECT_EQ(saturating_ceil_ms(std::chrono::seconds(std::numeric_limits<std::int64_t>::max() / 1000 + 1)),
              ms::max());
    EXPECT_EQ(
        saturating_ceil_ms(duration<std::uint64_t, std::milli>(std::numeric_limits<std::uint64_t>::max())),
        ms::max());
    EXPECT_EQ(saturating_ceil_ms(duration<std::uint64_t>(std::numeric_limits<std::uint64_t>::max())),
              ms::max());
}

TEST(saturating_ceil_ms, odd_units_whose_product_overflows_convert_through_the_quotient) {
    // 1.000001 ms a unit: count * 1000001 overflows long before count * 1.000001 does.
    using odd = duration<std::int64_t, std::ratio<1'000'001, 1'000'000'000>>;
    EXPECT_EQ(saturating_ceil_ms(odd(1'000'000'000'000'000)), ms(1'000'001'000'000'000));
    EXPECT_EQ(saturating_ceil_ms(odd::max()), ms::max());
    EXPECT_EQ(saturating_ceil_ms(odd::min()), ms::min());
}

TEST(saturating_ceil_ms, floating_durations_past_the_range_saturate_and_nan_is_zero) {
    EXPECT_EQ(saturating_ceil_ms(duration<double>(1e300)), ms::max());
    EXPECT_EQ(saturating_ceil_ms(duration<double>(-1e300)), ms::min());
    EXPECT_EQ(saturating_ceil_ms(duration<double>(std::numeric_limits<double>::infinity())), ms::max());
    EXPECT_EQ(saturating_ceil_ms(duration<float, std::ratio<3600>>(std::numeric_limits<float>::max())),
              ms::max());
    EXPECT_EQ(saturating_ceil_ms(duration<double, std::milli>(9.2233720368547758e18)), ms::max()) << "2^63";
    EXPECT_EQ(saturating_ceil_ms(duration<long double>(std::numeric_limits<long double>::max())), ms::max());
    EXPECT_EQ(saturating_ceil_ms(duration<double>(std::numeric_limits<double>::quiet_NaN())), ms::zero());
}

} // namespace
} // namespace sluice::detail
