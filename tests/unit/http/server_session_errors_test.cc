// Every malformed or unsupported request gets its status (400, 501, 505), whole, byte by
// byte and split at every point, and the session stays failed afterwards.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>

#include "http/server_session.h"
#include "http/session_driver.h"

namespace sluice::http::test {
namespace {

struct error_case {
    const char* name;
    std::string input;
    int status;
    friend std::ostream& operator<<(std::ostream& os, const error_case& c) { return os << c.name; }
};

const std::string host = "Host: h\r\n";
const std::string chunked_te = "Transfer-Encoding: chunked\r\n\r\n";

std::string case_name(const ::testing::TestParamInfo<error_case>& p) {
    return p.param.name;
}

class ServerSessionErrors : public ::testing::TestWithParam<error_case> {};

TEST_P(ServerSessionErrors, FailsWithTheStatusWhateverTheSplit) {
    const error_case& c = GetParam();
    const auto whole = drive_whole(c.input);
    EXPECT_TRUE(whole.requests.empty());
    EXPECT_EQ(whole.last, feed_status::failed);
    EXPECT_EQ(whole.final_phase, phase::failed);
    EXPECT_EQ(whole.error_status, c.status) << whole.error_reason;
    EXPECT_FALSE(whole.error_reason.empty());

    const auto bytewise = drive_bytewise(c.input);
    EXPECT_EQ(bytewise.error_status, c.status) << "byte by byte: " << bytewise.error_reason;

    for (std::size_t cut = 1; cut < c.input.size(); ++cut) {
        const auto split = drive(c.input, {cut});
        ASSERT_EQ(split.error_status, c.status) << "cut at " << cut << ": " << split.error_reason;
    }
}

TEST_P(ServerSessionErrors, StaysFailed) {
    server_session s{session_limits{}};
    request req;
    ASSERT_EQ(s.feed(GetParam().input, req).status, feed_status::failed);
    const auto again = s.feed("GET / HTTP/1.1\r\nHost: h\r\n\r\n", req);
    EXPECT_EQ(again.status, feed_status::failed);
    EXPECT_EQ(again.consumed, 0u);
    EXPECT_EQ(s.error_status(), GetParam().status);
}

// 400: syntax, framing and Host (RFC 9112 §3.2, §5.1, §6.1, §6.3).
INSTANTIATE_TEST_SUITE_P(
    BadRequest, ServerSessionErrors,
    ::testing::Values(
        error_case{"ContentLengthWithTransferEncoding",
                   "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                   400},
        error_case{"TransferEncodingWithContentLength",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                   400},
        error_case{"DuplicateContentLength",
                   "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nContent-Length: 3\r\n\r\n", 400},
        error_case{"ConflictingContentLength",
                   "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
        error_case{"ContentLengthList", "POST / HTTP/1.1\r\n" + host + "Content-Length: 3, 3\r\n\r\n", 400},
        error_case{"NegativeContentLength", "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", 400},
        error_case{"ContentLengthOverflow",
                   "POST / HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999999\r\n\r\n", 400},
        error_case{"MissingHostOn11", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400},
        error_case{"DuplicateHostOn11", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
        error_case{"DuplicateHostOn10", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", 400},
        error_case{"InvalidHost", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
        error_case{"HostWithUserinfo", "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400},
        error_case{"SpaceBeforeColon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400},
        error_case{"SpaceBeforeColonOnAnyHeader", "GET / HTTP/1.1\r\n" + host + "X-A : 1\r\n\r\n", 400},
        error_case{"SpaceBeforeColonSmugglingChunked",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding : chunked\r\nContent-Length: 1\r\n\r\nx",
                   400},
        error_case{"EmptyHeaderName", "GET / HTTP/1.1\r\n" + host + ": v\r\n\r\n", 400},
        error_case{"NonAsciiInTarget", "GET /caf\xC3\xA9 HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"TabInTarget", "GET /a\tb HTTP/1.1\r\n" + host + "\r\n", 400},
        // RFC 9112 §3.2: no fragment in a request-target; RFC 9110 §4.2.1, §4.2.4: an http URI
        // with an empty host is invalid, and userinfo is an error.
        error_case{"FragmentInTarget", "GET /json#x HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"FragmentAfterQuery", "GET /json?a#b HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"AbsoluteFormWithoutHost", "GET http:///json HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"AbsoluteFormWithUserinfo", "GET http://u:p@h/json HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"AbsoluteFormWithEmptyUserinfo", "GET https://@/json HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"DelInTarget", "GET /a\x7f HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"TabBeforeColon", "GET / HTTP/1.1\r\n" + host + "X-A\t: 1\r\n\r\n", 400},
        error_case{"BareLfAfterHeaderValue", "GET / HTTP/1.1\r\nHost: h\nAccept: */*\r\n\r\n", 400},
        error_case{"FinalCodingNotChunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n",
                   400},
        error_case{"ChunkedNotLast",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, gzip\r\n\r\n", 400},
        error_case{"ChunkedNotLastOverTwoLines",
                   "POST / HTTP/1.1\r\n" + host +
                       "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
                   400},
        error_case{"ChunkedTwice",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, chunked\r\n\r\n", 400},
        error_case{"IdentityCoding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n",
                   400},
        error_case{"TransferEncodingOnHttp10",
                   "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        // An empty Transfer-Encoding is still the field: a hop that reads any TE as chunked
        // would frame the body differently from one that reads Content-Length.
        error_case{"EmptyTransferEncodingWithContentLength",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \r\nContent-Length: 2\r\n\r\nhi", 400},
        error_case{"ContentLengthWithEmptyTransferEncoding",
                   "POST / HTTP/1.1\r\n" + host + "Content-Length: 2\r\nTransfer-Encoding:\r\n\r\nhi", 400},
        error_case{"BlankTransferEncodingWithContentLength",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding:  \t \r\nContent-Length: 2\r\n\r\nhi",
                   400},
        error_case{"EmptyTransferEncoding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \r\n\r\n",
                   400},
        error_case{"EmptyTransferEncodingOnHttp10",
                   "POST / HTTP/1.0\r\nTransfer-Encoding: \r\nContent-Length: 2\r\n\r\nhi", 400},
        error_case{"BadHeaderNameChar", "GET / HTTP/1.1\r\n" + host + "X(y): 1\r\n\r\n", 400},
        error_case{"ControlCharInValue", "GET / HTTP/1.1\r\n" + host + "X: a\x01z\r\n\r\n", 400},
        error_case{"NulInValue", "GET / HTTP/1.1\r\n" + host + std::string("X: a\0z\r\n\r\n", 11), 400},
        error_case{"CrWithoutLf", "GET / HTTP/1.1\r\n" + host + "X: a\rY: b\r\n\r\n", 400},
        error_case{"BadChunkSize", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                   400},
        error_case{"ChunkSizeOverflow",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
                   400},
        error_case{"ChunkDataTooLong",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n",
                   400},
        error_case{"GarbageMethod", "G@T / HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"TlsOnAPlainPort", std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11), 400},
        error_case{"LeadingSpace", " GET / HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"SpaceInTarget", "GET /a b HTTP/1.1\r\n" + host + "\r\n", 400},
        error_case{"MissingVersion", "GET /\r\n" + host + "\r\n", 400},
        error_case{"LowercaseProtocol", "GET / http/1.1\r\n" + host + "\r\n", 400},
        // llhttp also parses RTSP and ICE request lines; HTTP-name is "HTTP" (RFC 9112 §2.3).
        error_case{"RtspProtocol", "GET / RTSP/1.1\r\n" + host + "\r\n", 400},
        error_case{"RtspProtocolOn10", "GET / RTSP/1.0\r\n\r\n", 400},
        error_case{"IceProtocol", "SOURCE / ICE/1.0\r\n" + host + "\r\n", 400},
        error_case{"TwoDigitMinor", "GET / HTTP/1.10\r\n" + host + "\r\n", 400},
        error_case{"NonDigitVersion", "GET / HTTP/x.y\r\n" + host + "\r\n", 400},
        error_case{"WhitespaceBeforeFirstHeader", "GET / HTTP/1.1\r\n " + host + "\r\n", 400},
        // RFC 9112 §7.1.2: trailer fields are field lines like the header section's.
        error_case{"EmptyTrailerName", "POST / HTTP/1.1\r\n" + host + chunked_te + "1\r\nx\r\n0\r\n: v\r\n\r\n",
                   400},
        error_case{"EmptyTrailerLine", "POST / HTTP/1.1\r\n" + host + chunked_te + "1\r\nx\r\n0\r\n:\r\n\r\n",
                   400},
        error_case{"SpaceBeforeColonInATrailer",
                   "POST / HTTP/1.1\r\n" + host + chunked_te + "1\r\nx\r\n0\r\nX-T : 1\r\n\r\n", 400}),
    case_name);

// 501: well-formed but not implemented (RFC 9110 §9.1, §15.6.2; RFC 9112 §6.1).
INSTANTIATE_TEST_SUITE_P(
    NotImplemented, ServerSessionErrors,
    ::testing::Values(
        error_case{"UnknownMethod", "BREW /pot HTTP/1.1\r\n" + host + "\r\n", 501},
        error_case{"UnknownMethodPrefixOfAKnownOne", "PROP / HTTP/1.1\r\n" + host + "\r\n", 501},
        error_case{"KnownMethodWithSuffix", "GETS / HTTP/1.1\r\n" + host + "\r\n", 501},
        error_case{"MethodsAreCaseSensitive", "get / HTTP/1.1\r\n" + host + "\r\n", 501},
        error_case{"UnknownCodingBeforeChunked",
                   "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
        error_case{"UnknownCodingOnItsOwnLine",
                   "POST / HTTP/1.1\r\n" + host +
                       "Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n",
                   501},
        error_case{"Connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501}),
    case_name);

// 505: not HTTP/1.x (RFC 9110 §15.6.6).
INSTANTIATE_TEST_SUITE_P(VersionNotSupported, ServerSessionErrors,
                         ::testing::Values(error_case{"Http20", "GET / HTTP/2.0\r\n" + host + "\r\n", 505},
                                           error_case{"Http09", "GET / HTTP/0.9\r\n\r\n", 505},
                                           error_case{"Http30", "GET / HTTP/3.0\r\n" + host + "\r\n", 505},
                                           error_case{"Http12", "GET / HTTP/1.2\r\n" + host + "\r\n", 505},
                                           error_case{"Http2Preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                                                      505}),
                         case_name);

// The request line and the headers before the bad one are still readable after the failure,
// as sent, whatever the split: the connection logs the failed request's method and target,
// and its Referer and User-Agent.
TEST(ServerSessionErrors, AFailedRequestKeepsWhatItHadParsed) {
    const std::string in = "GET /where?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: curl/7.88  \r\n"
                           "Referer: http://r/\r\nBad Name: v\r\n\r\n";
    const auto check = [](const outcome& o, const std::string& how) {
        ASSERT_EQ(o.error_status, 400) << how;
        EXPECT_EQ(o.at_failure.method, "GET") << how;
        EXPECT_EQ(o.at_failure.target, "/where?x=1") << how;
        ASSERT_GE(o.at_failure.headers.size(), 3u) << how;
        EXPECT_EQ(o.at_failure.headers[0], (std::pair<std::string, std::string>{"Host", "h"})) << how;
        EXPECT_EQ(o.at_failure.headers[1], (std::pair<std::string, std::string>{"User-Agent", "curl/7.88"}))
            << how;
        EXPECT_EQ(o.at_failure.headers[2], (std::pair<std::string, std::string>{"Referer", "http://r/"}))
            << how;
    };
    check(drive_whole(in), "whole");
    check(drive_bytewise(in), "byte by byte");
    for (std::size_t cut = 1; cut < in.size(); ++cut) {
        check(drive(in, {cut}), "cut at " + std::to_string(cut));
    }
}

// A request that fails after earlier pipelined ones were answered: those stay good.
TEST(ServerSessionErrors, AFailureAfterGoodRequestsKeepsThem) {
    const std::string good = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    const auto o = drive_whole(good + good + "GET /c HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 2u);
    EXPECT_EQ(o.error_status, 400);
}

} // namespace
} // namespace sluice::http::test
