#include <gtest/gtest.h>

#include <string>

#include "tls/plain_http_probe.h"

namespace sluice::detail {
namespace {

TEST(plain_http_probe, tls_records_never_reach_the_probe) {
    EXPECT_FALSE(may_be_plain_http('\x16')); // handshake record
    EXPECT_FALSE(may_be_plain_http('\x15')); // alert
    EXPECT_FALSE(may_be_plain_http('\x80')); // SSLv2-style hello
    EXPECT_FALSE(may_be_plain_http('g'));
    EXPECT_TRUE(may_be_plain_http('G'));
}

TEST(plain_http_probe, a_method_and_a_space_is_a_request_line) {
    for (const char* first :
         {"GET ", "PUT /", "POST /x HTTP/1.1", "DELETE /", "OPTIONS *", "PATCH /a", "HEAD /"}) {
        EXPECT_EQ(probe_plain_http(first), plain_probe::request_line) << first;
    }
}

TEST(plain_http_probe, a_method_cut_short_waits_for_more) {
    for (const char* first : {"G", "GE", "GET", "OPTIONS"}) {
        EXPECT_EQ(probe_plain_http(first), plain_probe::need_more) << first;
    }
}

TEST(plain_http_probe, anything_else_is_neither) {
    for (const char* first :
         {"GETTINGLONG / ", "OPTIONSX", "GE /", "A /", "GET\t/", "GET\r\n", "Get /", "G3T /"}) {
        EXPECT_EQ(probe_plain_http(first), plain_probe::neither) << first;
    }
}

TEST(plain_http_probe, only_the_first_bytes_count) {
    EXPECT_EQ(probe_plain_http("OPTIONS / HTTP/1.1\r\n"), plain_probe::request_line);
    EXPECT_EQ(probe_plain_http(std::string(100, 'A')), plain_probe::neither);
}

TEST(plain_http_probe, the_reply_is_a_whole_400_that_closes) {
    std::string out = "kept";
    append_plain_http_reply(out);
    ASSERT_EQ(out.rfind("kept", 0), 0U);
    const std::string reply = out.substr(4);
    EXPECT_EQ(reply.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0U);
    EXPECT_NE(reply.find("\r\nConnection: close\r\n"), std::string::npos);
    const std::size_t end = reply.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos);
    const std::string body = reply.substr(end + 4);
    EXPECT_NE(reply.find("\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos)
        << reply;
    EXPECT_NE(body.find("HTTPS"), std::string::npos);
}

} // namespace
} // namespace sluice::detail
