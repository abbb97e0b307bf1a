// The rule of loop/paused_hang_up.h on its own: which end-of-stream reports a receiver
// believes after it paused.
#include <gtest/gtest.h>

#include "loop/paused_hang_up.h"

namespace sluice::detail {
namespace {

TEST(paused_hang_up, an_end_without_a_pause_is_believed) {
    paused_hang_up h;
    h.armed();
    h.received();
    EXPECT_FALSE(h.stale_end());
}

TEST(paused_hang_up, the_first_end_after_a_pause_is_stale_and_the_next_is_believed) {
    paused_hang_up h;
    h.armed();
    h.paused();
    EXPECT_TRUE(h.stale_end());
    EXPECT_FALSE(h.stale_end());
}

TEST(paused_hang_up, reads_made_before_the_rearm_do_not_clear_it) {
    paused_hang_up h;
    h.armed();
    h.paused();
    h.received(); // a read the pause had not stopped yet
    h.armed();    // resumed, armed again
    EXPECT_TRUE(h.stale_end()) << "the pause's hang-up behind the re-arm";
}

TEST(paused_hang_up, bytes_to_an_arm_made_since_the_pause_clear_it) {
    paused_hang_up h;
    h.paused();
    h.armed();
    h.received();
    EXPECT_FALSE(h.stale_end());
}

// Two pauses before the first one's report came (epoll reports a hang-up once per pause):
// each report is held as stale, even when the first is heard after the second pause and the
// second after a re-arm (found by review).
TEST(paused_hang_up, two_pauses_hold_two_reports) {
    paused_hang_up h;
    h.armed();
    h.paused();
    h.armed();
    h.paused();
    EXPECT_TRUE(h.stale_end()); // the first pause's, heard while paused again
    h.armed();
    EXPECT_TRUE(h.stale_end()) << "the second pause's report, behind the re-arm";
    EXPECT_FALSE(h.stale_end());
}

// A real end costs at most a bounded number of receives more, however often the receiver
// paused without a byte in between.
TEST(paused_hang_up, the_reports_held_are_bounded) {
    paused_hang_up h;
    for (int i = 0; i < 1000; ++i) {
        h.paused();
        h.armed();
    }
    int stale = 0;
    while (h.stale_end()) {
        ++stale;
        ASSERT_LE(stale, paused_hang_up::max_held);
    }
    EXPECT_EQ(stale, paused_hang_up::max_held);
}

} // namespace
} // namespace sluice::detail
