// The response type: serialized headers (set, add, remove, lookup, validation), the body
// helpers, streaming writes, clear(), reason phrases, and the core's access to streaming.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include <sluice/response.h>

#include "http/response_access.h"

namespace sluice {
namespace {

using detail::response_access;

TEST(Response, StartsAsAnEmpty200) {
    const response r;
    EXPECT_EQ(r.status(), 200);
    EXPECT_EQ(r.raw_headers(), "");
    EXPECT_EQ(r.body(), "");
    EXPECT_FALSE(r.is_streaming());
    EXPECT_EQ(response{404}.status(), 404);
}

TEST(Response, KeepsHeadersSerialized) {
    response r;
    r.header("X-A", "1").header("X-B", "two words");
    EXPECT_EQ(r.raw_headers(), "X-A: 1\r\nX-B: two words\r\n");
}

TEST(Response, HeaderReplacesEveryEarlierOneCaseInsensitively) {
    response r;
    r.add_header("Vary", "a").header("X", "keep").add_header("vary", "b");
    r.header("VARY", "c");
    EXPECT_EQ(r.raw_headers(), "X: keep\r\nVARY: c\r\n");
}

TEST(Response, AddHeaderKeepsEarlierOnes) {
    response r;
    r.add_header("Set-Cookie", "a=1").add_header("Set-Cookie", "b=2");
    EXPECT_EQ(r.raw_headers(), "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
    EXPECT_EQ(r.header("set-cookie"), "a=1");
}

TEST(Response, RemoveHeaderRemovesEveryMatchAndCountsThem) {
    response r;
    r.add_header("A", "1").add_header("B", "2").add_header("a", "3").add_header("C", "4").add_header("A",
                                                                                                     "5");
    EXPECT_EQ(r.remove_header("A"), 3u);
    EXPECT_EQ(r.raw_headers(), "B: 2\r\nC: 4\r\n");
    EXPECT_EQ(r.remove_header("A"), 0u);
    EXPECT_EQ(r.remove_header("c"), 1u);
    EXPECT_EQ(r.remove_header("b"), 1u);
    EXPECT_EQ(r.raw_headers(), "");
}

TEST(Response, RemoveHeaderMatchesWholeNamesOnly) {
    response r;
    r.add_header("X-Long", "1").add_header("X", "2").add_header("X-", "3");
    EXPECT_EQ(r.remove_header("X"), 1u);
    EXPECT_EQ(r.raw_headers(), "X-Long: 1\r\nX-: 3\r\n");
}

TEST(Response, HeaderLookupFindsTheFirstValue) {
    response r;
    r.add_header("Content-Type", "text/html").add_header("X", "").add_header("Y", "a: b");
    EXPECT_EQ(r.header("content-type"), "text/html");
    EXPECT_EQ(r.header("x"), "");
    EXPECT_EQ(r.header("Y"), "a: b");
    EXPECT_FALSE(r.header("Z"));
    EXPECT_FALSE(r.header("Content"));
}

TEST(Response, RejectsNamesThatAreNotTokens) {
    response r;
    for (const std::string_view bad :
         {"", "Bad Name", "a:b", "x\r\ny", "(x)", "\xC3\xA9", "a\tb", "a/b", "{x}"}) {
        EXPECT_THROW(r.header(bad, "v"), std::invalid_argument) << bad;
        EXPECT_THROW(r.add_header(bad, "v"), std::invalid_argument) << bad;
    }
    EXPECT_EQ(r.raw_headers(), "");
    // Every tchar is fine (RFC 9110 §5.6.2).
    EXPECT_NO_THROW(r.header("!#$%&'*+-.^_`|~09azAZ", "v"));
}

TEST(Response, RejectsValuesThatCouldSplitTheResponse) {
    response r;
    const std::string with_nul{"a\0b", 3};
    for (const std::string_view bad : {std::string_view{"a\r\nX-Injected: 1"}, std::string_view{"a\rb"},
                                       std::string_view{"a\nb"}, std::string_view{with_nul}}) {
        EXPECT_THROW(r.header("X", bad), std::invalid_argument);
        EXPECT_THROW(r.add_header("X", bad), std::invalid_argument);
    }
    EXPECT_EQ(r.raw_headers(), "");
    // Other bytes are the handler's business: tabs, obs-text, an empty value.
    EXPECT_NO_THROW(r.header("X", "a\tb \xC3\xA9"));
    EXPECT_NO_THROW(r.header("Y", ""));
}

TEST(Response, ARejectedHeaderLeavesTheExistingOnes) {
    response r;
    r.header("X", "1");
    EXPECT_THROW(r.header("X", "bad\n"), std::invalid_argument);
    EXPECT_EQ(r.header("X"), "1");
}

TEST(Response, BodyHelpersSetTheContentType) {
    response r;
    r.text("t");
    EXPECT_EQ(r.header("Content-Type"), "text/plain; charset=utf-8");
    EXPECT_EQ(r.body(), "t");
    r.json("{}");
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    EXPECT_EQ(r.body(), "{}");
    r.html("<p>");
    EXPECT_EQ(r.header("Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(r.body(), "<p>");
    EXPECT_EQ(r.raw_headers(), "Content-Type: text/html; charset=utf-8\r\n"); // replaced, not added
    r.content_type("image/png");
    EXPECT_EQ(r.raw_headers(), "Content-Type: image/png\r\n");
}

TEST(Response, WriteSwitchesToStreamingAndAccumulatesPendingBytes) {
    response r;
    r.body("first ");
    r.write("second ").write("third");
    EXPECT_TRUE(r.is_streaming());
    EXPECT_EQ(r.body(), "first second third");

    EXPECT_FALSE(response_access::is_head_sent(r));
    response_access::mark_head_sent(r);
    EXPECT_TRUE(response_access::is_head_sent(r));

    EXPECT_EQ(response_access::pending(r), "first second third");
    response_access::clear_pending(r);
    EXPECT_EQ(r.body(), "");
    r.write("more");
    EXPECT_EQ(response_access::pending(r), "more");
    response_access::clear_pending(r);
    EXPECT_EQ(response_access::pending(r), "");
    EXPECT_TRUE(r.is_streaming());
}

TEST(Response, ClearGoesBackToAFresh200) {
    response r{500};
    r.header("X", "1").write("data");
    response_access::mark_head_sent(r);
    r.clear();
    EXPECT_EQ(r.status(), 200);
    EXPECT_EQ(r.raw_headers(), "");
    EXPECT_EQ(r.body(), "");
    EXPECT_FALSE(r.is_streaming());
    EXPECT_FALSE(response_access::is_head_sent(r));
}

TEST(Response, ContentLengthDeclaresAStreamAndIsLockedOnceTheHeadIsOut) {
    response r;
    EXPECT_FALSE(r.content_length());
    r.body("first ");
    r.content_length(11).content_length(12); // the last declaration before the head wins
    EXPECT_TRUE(r.is_streaming());
    EXPECT_EQ(r.content_length(), 12u);
    EXPECT_EQ(response_access::pending(r), "first "); // a body set before is the first piece
    response_access::mark_head_sent(r);
    EXPECT_NO_THROW(r.content_length(12)); // what the head already says
    EXPECT_THROW(r.content_length(11), std::logic_error);
    EXPECT_EQ(r.content_length(), 12u);
    r.clear();
    EXPECT_FALSE(r.content_length());
    EXPECT_FALSE(r.is_streaming());
}

TEST(Response, ContentLengthAfterAChunkedHeadThrows) {
    response r;
    r.write("x");
    response_access::mark_head_sent(r);
    EXPECT_THROW(r.content_length(1), std::logic_error);
    EXPECT_FALSE(r.content_length());
}

TEST(ReasonPhrase, KnowsTheStandardCodes) {
    EXPECT_EQ(reason_phrase(100), "Continue");
    EXPECT_EQ(reason_phrase(200), "OK");
    EXPECT_EQ(reason_phrase(204), "No Content");
    EXPECT_EQ(reason_phrase(304), "Not Modified");
    EXPECT_EQ(reason_phrase(400), "Bad Request");
    EXPECT_EQ(reason_phrase(404), "Not Found");
    EXPECT_EQ(reason_phrase(408), "Request Timeout");
    EXPECT_EQ(reason_phrase(413), "Content Too Large");
    EXPECT_EQ(reason_phrase(414), "URI Too Long");
    EXPECT_EQ(reason_phrase(417), "Expectation Failed");
    EXPECT_EQ(reason_phrase(429), "Too Many Requests");
    EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
    EXPECT_EQ(reason_phrase(500), "Internal Server Error");
    EXPECT_EQ(reason_phrase(501), "Not Implemented");
    EXPECT_EQ(reason_phrase(503), "Service Unavailable");
    EXPECT_EQ(reason_phrase(504), "Gateway Timeout");
    EXPECT_EQ(reason_phrase(505), "HTTP Version Not Supported");
}

TEST(ReasonPhrase, SaysUnknownForOthers) {
    for (const int code : {0, -1, 99, 299, 418, 599, 600, 1000}) {
        EXPECT_EQ(reason_phrase(code), "Unknown") << code;
    }
}

} // namespace
} // namespace sluice
