// deadline_after: "now + d" that saturates instead of overflowing (UBSan checks the arithmetic
// in the asan preset).
#include <gtest/gtest.h>

#include <chrono>

#include "loop/deadline.h"

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

TEST(deadline_after, adds_ordinary_delays) {
    const auto now = clock::now();
    EXPECT_EQ(deadline_after(now, milliseconds(250)), now + milliseconds(250));
    EXPECT_EQ(deadline_after(now, milliseconds(0)), now);
}

TEST(deadline_after, saturates_at_the_end_of_time) {
    const auto now = clock::now();
    EXPECT_EQ(deadline_after(now, milliseconds::max()), clock::time_point::max());
    // Years: fits in milliseconds, but not as nanoseconds added to now.
    EXPECT_EQ(deadline_after(now, milliseconds(std::int64_t{1} << 62)), clock::time_point::max());
    EXPECT_EQ(deadline_after(clock::time_point::max(), milliseconds(1)), clock::time_point::max());
    // Just below the limit still adds exactly.
    const auto room = std::chrono::duration_cast<milliseconds>(clock::time_point::max() - now);
    EXPECT_EQ(deadline_after(now, room - milliseconds(1)), now + (room - milliseconds(1)));
}

TEST(deadline_after, a_negative_delay_is_now) {
    const auto now = clock::now();
    EXPECT_EQ(deadline_after(now, milliseconds(-5)), now);
    EXPECT_EQ(deadline_after(now, milliseconds::min()), now);
}

} // namespace
} // namespace sluice::detail
