// Access log lines: the combined format and JSON, escaping of what a client controls.
#include <gtest/gtest.h>

#include "access_log/access_format.h"

namespace sluice::detail {
namespace {

access_record sample() {
    access_record r;
    r.remote = "192.0.2.7:51234";
    r.method = "GET";
    r.target = "/items/3?x=1";
    r.version = {1, 1};
    r.status = 200;
    r.body_bytes = 1234;
    r.referer = "http://example.com/";
    r.user_agent = "curl/7.88.1";
    r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'700'000'000'123));
    r.duration = std::chrono::microseconds(1500);
    return r;
}

std::string line(const access_record& r, access_log_format f) {
    std::string out;
    append_access_line(out, r, f);
    return out;
}

TEST(access_format, combined) {
    EXPECT_EQ(line(sample(), access_log_format::combined),
              "192.0.2.7 - - [14/Nov/2023:22:13:20 +0000] \"GET /items/3?x=1 HTTP/1.1\" 200 1234 "
              "\"http://example.com/\" \"curl/7.88.1\"\n");
}

TEST(access_format, combined_escapes_what_could_forge_a_line_and_dashes_what_is_missing) {
    access_record r = sample();
    r.remote = "[::1]:80";
    r.user_agent = "evil\"\n1.2.3.4 - - \\ \xff";
    r.referer = "";
    EXPECT_EQ(line(r, access_log_format::combined),
              "::1 - - [14/Nov/2023:22:13:20 +0000] \"GET /items/3?x=1 HTTP/1.1\" 200 1234 \"-\" "
              "\"evil\\x22\\x0A1.2.3.4 - - \\x5C \\xFF\"\n");
    r.method = "";
    EXPECT_NE(line(r, access_log_format::combined).find("] \"-\" 200 "), std::string::npos);
}

TEST(access_format, json) {
    access_record r = sample();
    r.user_agent = "a\"b\\c\x01\xc3\xa9";
    EXPECT_EQ(line(r, access_log_format::json),
              "{\"time\":\"2023-11-14T22:13:20.123Z\",\"remote\":\"192.0.2.7\",\"method\":\"GET\","
              "\"target\":\"/items/3?x=1\",\"protocol\":\"HTTP/1.1\",\"status\":200,\"bytes\":1234,"
              "\"referer\":\"http://example.com/\",\"user_agent\":\"a\\\"b\\\\c\\u0001\\u00C3\\u00A9\","
              "\"duration_s\":0.001500}\n");
}

// The date is formatted once per second per thread: lines of the same second share it, and the
// next second (or an earlier one: the clock may step back) gets its own.
TEST(access_format, time_of_consecutive_lines_follows_each_second) {
    access_record r = sample();
    const auto t0 = r.time;
    for (const auto f : {access_log_format::combined, access_log_format::json}) {
        r.time = t0;
        const std::string a = line(r, f);
        r.time = t0 + std::chrono::milliseconds(500); // 22:13:20.623: the same second
        const std::string b = line(r, f);
        r.time = t0 + std::chrono::milliseconds(900); // 22:13:21.023
        const std::string c = line(r, f);
        r.time = t0 - std::chrono::hours(24 * 31); // back a month: 14 Oct
        const std::string d = line(r, f);
        if (f == access_log_format::combined) {
            EXPECT_NE(a.find("[14/Nov/2023:22:13:20 +0000]"), std::string::npos) << a;
            EXPECT_NE(b.find("[14/Nov/2023:22:13:20 +0000]"), std::string::npos) << b;
            EXPECT_NE(c.find("[14/Nov/2023:22:13:21 +0000]"), std::string::npos) << c;
            EXPECT_NE(d.find("[14/Oct/2023:22:13:20 +0000]"), std::string::npos) << d;
        } else {
            EXPECT_NE(a.find("\"2023-11-14T22:13:20.123Z\""), std::string::npos) << a;
            EXPECT_NE(b.find("\"2023-11-14T22:13:20.623Z\""), std::string::npos) << b;
            EXPECT_NE(c.find("\"2023-11-14T22:13:21.023Z\""), std::string::npos) << c;
            EXPECT_NE(d.find("\"2023-10-14T22:13:20.123Z\""), std::string::npos) << d;
        }
    }
}

TEST(access_format, escapes_at_the_start_the_end_and_in_a_row) {
    access_record r = sample();
    r.user_agent = "\"\"a b\x7f";
    r.referer = "\\";
    EXPECT_NE(line(r, access_log_format::combined).find("\"\\x5C\" \"\\x22\\x22a b\\x7F\"\n"),
              std::string::npos)
        << line(r, access_log_format::combined);
}

TEST(access_format, address_of) {
    EXPECT_EQ(address_of("10.0.0.1:8080"), "10.0.0.1");
    EXPECT_EQ(address_of("[2001:db8::1]:443"), "2001:db8::1");
    EXPECT_EQ(address_of("unix"), "unix");
}

} // namespace
} // namespace sluice::detail
