// The Date cache: IMF-fixdate (RFC 9110 §5.6.7), recomputed only when the second changes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>

#include "http/server_session.h"

namespace sluice::http {
namespace {

using std::chrono::system_clock;

system_clock::time_point at(std::int64_t seconds, std::int64_t millis = 0) {
    return system_clock::time_point{std::chrono::seconds{seconds} + std::chrono::milliseconds{millis}};
}

TEST(DateCache, FormatsTheRfcExample) {
    date_cache d;
    // RFC 9110 §5.6.7's example, 784111777 seconds after the epoch.
    EXPECT_EQ(d.get(at(784111777)), "Sun, 06 Nov 1994 08:49:37 GMT");
}

TEST(DateCache, FormatsKnownDates) {
    date_cache d;
    EXPECT_EQ(d.get(at(0)), "Thu, 01 Jan 1970 00:00:00 GMT");
    EXPECT_EQ(d.get(at(951782400)), "Tue, 29 Feb 2000 00:00:00 GMT"); // leap day
    EXPECT_EQ(d.get(at(1700000000)), "Tue, 14 Nov 2023 22:13:20 GMT");
    EXPECT_EQ(d.get(at(4102444799)), "Thu, 31 Dec 2099 23:59:59 GMT");
    EXPECT_EQ(d.get(at(1719792000)), "Mon, 01 Jul 2024 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1741910400)), "Fri, 14 Mar 2025 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1736640000)), "Sun, 12 Jan 2025 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1758240000)), "Fri, 19 Sep 2025 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1754092800)), "Sat, 02 Aug 2025 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1745971200)), "Wed, 30 Apr 2025 00:00:00 GMT");
    EXPECT_EQ(d.get(at(1746448496)), "Mon, 05 May 2025 12:34:56 GMT");
    EXPECT_EQ(d.get(at(1749517323)), "Tue, 10 Jun 2025 01:02:03 GMT");
    EXPECT_EQ(d.get(at(1760569209)), "Wed, 15 Oct 2025 23:00:09 GMT");
}

TEST(DateCache, IsAlways29Characters) {
    date_cache d;
    for (std::int64_t s = 0; s < 4102444800; s += 86400 * 37 + 3671) {
        ASSERT_EQ(d.get(at(s)).size(), 29u) << s;
    }
}

TEST(DateCache, ChangesOnlyWhenTheSecondChanges) {
    date_cache d;
    const std::string first{d.get(at(1700000000, 0))};
    const char* storage = d.get(at(1700000000, 999)).data();
    EXPECT_EQ(d.get(at(1700000000, 999)), first);
    EXPECT_EQ(d.get(at(1700000000, 500)).data(), storage);
    EXPECT_EQ(d.get(at(1700000001, 0)), "Tue, 14 Nov 2023 22:13:21 GMT");
    // Going back in time (a clock step) is a change too.
    EXPECT_EQ(d.get(at(1700000000, 1)), first);
}

TEST(DateCache, TruncatesToTheSecondBeforeTheEpochToo) {
    date_cache d;
    EXPECT_EQ(d.get(at(0, -1)), "Wed, 31 Dec 1969 23:59:59 GMT");
    EXPECT_EQ(d.get(at(-1, 0)), "Wed, 31 Dec 1969 23:59:59 GMT");
}

TEST(DateCache, MatchesTheSystemClockFormattedByHand) {
    date_cache d;
    const auto now = system_clock::now();
    const std::time_t t = system_clock::to_time_t(now);
    std::tm parts{};
    gmtime_r(&t, &parts);
    char expected[64];
    // strftime in the "C" locale (the default of a program that never calls setlocale).
    std::strftime(expected, sizeof expected, "%a, %d %b %Y %H:%M:%S GMT", &parts);
    const auto secs = std::chrono::floor<std::chrono::seconds>(now);
    EXPECT_EQ(d.get(secs), expected);
}

} // namespace
} // namespace sluice::http
