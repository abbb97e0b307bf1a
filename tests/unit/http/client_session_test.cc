// The client session (response parser): every framing, strictness, limits; each response fed
// whole and one byte at a time.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "http/client_session.h"

namespace sluice::http {
namespace {

enum class split { whole, bytes };

struct outcome {
    response_phase phase = response_phase::idle;
    std::error_code error;
    client_response res;
    std::size_t consumed = 0;
    bool keep_alive = false;
};

outcome parse(std::string_view wire, split how, bool head = false, bool eof = false,
              std::size_t max = 1 << 20) {
    outcome o;
    client_session s(max, max);
    s.begin(head, o.res);
    if (how == split::whole) {
        o.consumed = s.feed(wire);
    } else {
        for (std::size_t i = 0; i < wire.size(); ++i) {
            const std::size_t n = s.feed(wire.substr(i, 1));
            o.consumed += n;
            if (n == 0) {
                break;
            }
        }
    }
    if (eof) {
        s.finish();
    }
    o.phase = s.phase();
    o.error = s.error();
    o.keep_alive = s.keep_alive();
    return o;
}

class client_session_test : public ::testing::TestWithParam<split> {};

TEST_P(client_session_test, content_length_body) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello";
    auto o = parse(wire, GetParam());
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.res.status, 200);
    EXPECT_EQ(o.res.body, "hello");
    EXPECT_EQ(o.res.header("x-a"), "b");
    EXPECT_EQ(o.res.header("content-length"), "5");
    EXPECT_TRUE(o.keep_alive);
    EXPECT_EQ(o.consumed, wire.size());
}

TEST_P(client_session_test, stops_at_the_end_of_the_response) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiEXTRA";
    auto o = parse(wire, split::whole);
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.consumed, wire.size() - 5);
}

TEST_P(client_session_test, chunked_body_with_trailer) {
    auto o = parse(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n",
        GetParam());
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.res.body, "abcde");
    EXPECT_FALSE(o.res.header("t").has_value());
    EXPECT_TRUE(o.keep_alive);
}

TEST_P(client_session_test, close_delimited_body_ends_with_eof) {
    auto o = parse("HTTP/1.1 200 OK\r\n\r\nuntil the end", GetParam(), false, true);
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.res.body, "until the end");
    EXPECT_FALSE(o.keep_alive);
}

TEST_P(client_session_test, eof_inside_a_content_length_body_is_reset) {
    auto o = parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", GetParam(), false, true);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, client_errc::reset);
}

TEST_P(client_session_test, interim_responses_are_skipped) {
    auto o = parse("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
                   "HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nz",
                   GetParam());
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.res.status, 201);
    EXPECT_EQ(o.res.body, "z");
    EXPECT_FALSE(o.res.header("link").has_value());
}

TEST_P(client_session_test, head_response_has_no_body) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
    auto o = parse(wire, GetParam(), true);
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_EQ(o.res.body, "");
    EXPECT_TRUE(o.keep_alive);
}

TEST_P(client_session_test, no_content_statuses_end_with_their_head) {
    for (const char* wire : {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n"}) {
        auto o = parse(wire, GetParam());
        EXPECT_EQ(o.phase, response_phase::complete) << wire;
    }
}

// RFC 9112 §6.3 (1): a 204 or 304 ends with its head whatever it declares; RFC 9110 §8.6 lets a
// 304 carry the Content-Length of the representation. Bytes after the head are not its body:
// they stay with the caller, which closes the connection instead of pooling it.
TEST_P(client_session_test, no_content_statuses_end_with_their_head_whatever_they_declare) {
    for (const std::string head : {"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                                   "HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\nETag: \"x\"\r\n\r\n",
                                   "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
                                   "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
        const std::string wire = head + "hello";
        auto o = parse(wire, GetParam());
        EXPECT_EQ(o.phase, response_phase::complete) << head << ": " << o.error.message();
        EXPECT_EQ(o.res.body, "") << head;
        EXPECT_EQ(o.consumed, head.size()) << head;
    }
}

TEST_P(client_session_test, http10_closes_unless_keep_alive) {
    auto o = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", GetParam());
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_FALSE(o.keep_alive);
    o = parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", GetParam());
    ASSERT_EQ(o.phase, response_phase::complete);
    EXPECT_FALSE(o.keep_alive);
}

TEST_P(client_session_test, malformed_responses) {
    for (const char* wire : {
             "garbage\r\n\r\n",                                                            // HTTP/0.9 style
             "<html>hello</html>",                                                         // no status line
             "HTTP/2.0 200 OK\r\n\r\n",                                                    // not 1.x
             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", // CL + TE
             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",         // duplicate CL
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nx",                        // not chunked
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",                // chunked not last
             "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n",     // space before colon
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",      // no upgrade asked
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", // bad chunk size
             "HTTP/1.1 99 Odd\r\n\r\n",                                     // status out of range
         }) {
        auto o = parse(wire, GetParam());
        EXPECT_EQ(o.phase, response_phase::failed) << wire;
        EXPECT_EQ(o.error, client_errc::malformed_response) << wire;
    }
}

TEST_P(client_session_test, response_over_the_limit_is_too_large) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x');
    auto ok = parse(wire, GetParam(), false, false, wire.size());
    EXPECT_EQ(ok.phase, response_phase::complete);
    auto o = parse(wire, GetParam(), false, false, wire.size() - 1);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, client_errc::response_too_large);
}

TEST_P(client_session_test, a_head_of_more_fields_than_the_limit_is_too_large) {
    // Each field costs a client_header (~64 bytes) beside its bytes: 4-byte fields ("a:\r\n")
    // up to max_response_bytes would cost 16 times that in memory. The count is capped.
    const auto head_with = [](std::size_t fields) {
        std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n";
        for (std::size_t i = 1; i < fields; ++i) {
            wire += "a:\r\n";
        }
        return wire + "\r\n";
    };
    auto ok = parse(head_with(client_session::max_fields), GetParam());
    EXPECT_EQ(ok.phase, response_phase::complete);
    EXPECT_EQ(ok.res.headers.size(), client_session::max_fields);
    auto o = parse(head_with(client_session::max_fields + 1), GetParam());
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, client_errc::response_too_large);
}

TEST_P(client_session_test, nothing_received_then_eof_is_reset) {
    auto o = parse("", GetParam(), false, true);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, client_errc::reset);
}

TEST(client_session, begin_reuses_the_session_for_the_next_response) {
    client_session s(1 << 20, 1 << 20);
    client_response a;
    s.begin(false, a);
    ASSERT_GT(s.feed("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"), 0u);
    ASSERT_EQ(s.phase(), response_phase::complete);
    client_response b;
    s.begin(false, b);
    EXPECT_FALSE(s.started());
    s.feed("HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno");
    ASSERT_EQ(s.phase(), response_phase::complete);
    EXPECT_EQ(b.status, 404);
    EXPECT_EQ(b.body, "no");
}

INSTANTIATE_TEST_SUITE_P(splits, client_session_test, ::testing::Values(split::whole, split::bytes),
                         [](const ::testing::TestParamInfo<split>& i) {
                             return i.param == split::whole ? std::string("whole") : std::string("bytes");
                         });

} // namespace
} // namespace sluice::http
