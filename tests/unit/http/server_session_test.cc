// The server session: parsing, phases, keep-alive, Expect, HEAD, HTTP/1.0, EOF, and that
// the way the bytes are split never changes the result.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/request.h>

#include "http/server_session.h"
#include "http/session_driver.h"

namespace sluice::http::test {
namespace {

std::string printable_for_test(std::string_view s) {
    std::string out;
    for (char c : s) {
        out += c == '\r'   ? std::string("\\r")
               : c == '\n' ? std::string("\\n")
               : c == '\t' ? std::string("\\t")
                           : std::string(1, c);
    }
    return out;
}

using namespace std::string_literals;

TEST(ServerSession, ParsesARequestLikeWrkSendsIt) {
    const std::string in = "GET /users/42?fields=name&x=1 HTTP/1.1\r\nHost: localhost:8080\r\n"
                           "User-Agent: wrk\r\nAccept: */*\r\n\r\n";
    server_session s{session_limits{}};
    request req;
    const feed_result r = s.feed(in, req);
    ASSERT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, in.size());
    EXPECT_EQ(s.current_phase(), phase::ready);
    EXPECT_EQ(req.method(), "GET");
    EXPECT_EQ(req.target(), "/users/42?fields=name&x=1");
    EXPECT_EQ(req.path(), "/users/42");
    EXPECT_EQ(req.query(), "fields=name&x=1");
    EXPECT_EQ(req.version(), (http_version{1, 1}));
    EXPECT_TRUE(req.keep_alive());
    EXPECT_EQ(req.header_count(), 3u);
    EXPECT_EQ(req.header("host"), "localhost:8080");
    EXPECT_EQ(req.header("USER-AGENT"), "wrk");
    EXPECT_EQ(req.header("accept"), "*/*");
    EXPECT_FALSE(req.header("content-length"));
    EXPECT_TRUE(req.body().empty());
}

TEST(ServerSession, KeepsHeaderOrderAndNamesAsSentAndTrimsValueWhitespace) {
    const auto o = drive_whole("GET / HTTP/1.1\r\nHost: h\r\nX-One:  a b \t \r\nx-one: second\r\nEmpty:\r\n"
                               "Spaces:    \r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"Host", "h"}, {"X-One", "a b"}, {"x-one", "second"}, {"Empty", ""}, {"Spaces", ""}};
    EXPECT_EQ(o.requests[0].headers, expected);
}

TEST(ServerSession, ReadsAContentLengthBody) {
    const auto o = drive_whole("POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].method, "POST");
    EXPECT_EQ(o.requests[0].body, "hello world");
}

TEST(ServerSession, WalksThroughItsPhases) {
    server_session s{session_limits{}};
    request req;
    EXPECT_EQ(s.current_phase(), phase::idle);

    auto r = s.feed("POST / HTTP/1.1\r\nHo", req);
    EXPECT_EQ(r.status, feed_status::need_more);
    EXPECT_EQ(r.consumed, 19u);
    EXPECT_EQ(s.current_phase(), phase::head);

    r = s.feed("st: h\r\nContent-Length: 4\r\n\r\nab", req);
    EXPECT_EQ(r.status, feed_status::need_more);
    EXPECT_EQ(s.current_phase(), phase::body);

    r = s.feed("cd", req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, 2u);
    EXPECT_EQ(s.current_phase(), phase::ready);
    EXPECT_EQ(req.body(), "abcd");

    // Until next_request(), nothing more is consumed: the response comes first.
    r = s.feed("GET / HTTP/1.1\r\n", req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, 0u);

    s.next_request();
    EXPECT_EQ(s.current_phase(), phase::idle);
    req.clear();
    r = s.feed("GET / HTTP/1.1\r\nHost: h\r\n\r\n", req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(req.method(), "GET");
}

TEST(ServerSession, EmptyInputChangesNothing) {
    server_session s{session_limits{}};
    request req;
    const auto r = s.feed("", req);
    EXPECT_EQ(r.status, feed_status::need_more);
    EXPECT_EQ(r.consumed, 0u);
    EXPECT_EQ(s.current_phase(), phase::idle);
}

// RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line.
TEST(ServerSession, IgnoresEmptyLinesBeforeTheRequest) {
    const auto o = drive_whole("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].method, "GET");
}

TEST(ServerSession, KeepsAnAbsoluteFormTargetAsReceived) {
    const auto o = drive_whole("GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].target, "http://example.com/a?b=1");
    EXPECT_EQ(o.requests[0].query, "b=1");
}

TEST(ServerSession, ParsesHeadLikeGet) {
    const auto o = drive_whole("HEAD /file HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].method, "HEAD");
    EXPECT_EQ(o.requests[0].path, "/file");
    EXPECT_TRUE(o.requests[0].body.empty());
}

TEST(ServerSession, AcceptsHttp10WithoutHost) {
    const auto o = drive_whole("GET /old HTTP/1.0\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].version, (http_version{1, 0}));
    EXPECT_FALSE(o.requests[0].keep_alive);
}

TEST(ServerSession, AcceptsAnEmptyHost) {
    // RFC 9112 §3.2: Host is sent empty when the target URI has no authority.
    EXPECT_EQ(drive_whole("GET / HTTP/1.1\r\nHost:\r\n\r\n").requests.size(), 1u);
    EXPECT_EQ(drive_whole("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n").requests.size(), 1u);
}

// Upgrade is ignored (RFC 9110 §7.8 lets a server do so): the request is an ordinary one and
// the bytes after it are the next request, not a foreign protocol.
TEST(ServerSession, IgnoresUpgrade) {
    const auto o =
        drive_whole("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                    "GET /next HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 2u);
    EXPECT_EQ(o.requests[1].path, "/next");
}

// --- bare LF, as llhttp (no lenient flags) treats it ---

TEST(ServerSession, AcceptsBareLfWhereLlhttpDoes) {
    // After the request-line and as the final empty line llhttp accepts a lone LF, which RFC
    // 9112 §2.2 permits ("MAY recognize a single LF as a line terminator").
    EXPECT_EQ(drive_whole("GET / HTTP/1.1\nHost: h\r\n\r\n").requests.size(), 1u);
    EXPECT_EQ(drive_whole("GET / HTTP/1.1\r\nHost: h\r\n\n").requests.size(), 1u);
}

TEST(ServerSession, RejectsBareLfWhereLlhttpDoes) {
    for (const std::string& in :
         {"GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n"s, "GET / HTTP/1.1\r\nHost: h\n\n"s,
          "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"s,
          "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n"s}) {
        const auto o = drive_whole(in);
        EXPECT_EQ(o.last, feed_status::failed) << in;
        EXPECT_EQ(o.error_status, 400) << in;
    }
}

// RFC 9112 §5.2 lets a server either replace obs-fold or reject it with 400; sluice rejects it
// (issue 7): a proxy could not forward a folded header byte-exact, and an unfolded value is
// not what the client's other hops saw. Whole, byte by byte and split at every point.
TEST(ServerSession, RejectsObsoleteLineFoldingWith400) {
    for (const std::string& in :
         {"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"s,
          "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n"s,
          "GET / HTTP/1.1\r\nX: a\r\n  b\r\nHost: h\r\n\r\n"s,
          "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n \r\n\r\n"s, "GET / HTTP/1.1\r\nHost: h\r\nX:\r\n b\r\n\r\n"s,
          "GET / HTTP/1.1\r\nHost: h\r\nX: a \r\n\t \r\n\r\n"s,
          // An empty first line folded onto a blank one: llhttp reports no piece of either.
          "GET / HTTP/1.1\r\nHost: h\r\nX:\r\n \r\nConnection: close\r\n\r\n"s,
          "GET / HTTP/1.1\r\nHost: h\r\nX: \r\n \r\n\r\n"s, "GET / HTTP/1.1\r\nX:\r\n\t\r\nHost: h\r\n\r\n"s,
          "GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n \r\n\r\n"s}) {
        const auto o = drive_whole(in);
        EXPECT_TRUE(o.requests.empty()) << printable_for_test(in);
        EXPECT_EQ(o.error_status, 400) << printable_for_test(in) << ": " << o.error_reason;
        EXPECT_EQ(drive_bytewise(in).error_status, 400) << "byte by byte: " << printable_for_test(in);
        for (std::size_t cut = 1; cut < in.size(); ++cut) {
            ASSERT_EQ(drive(in, {cut}).error_status, 400)
                << "cut at " << cut << ": " << printable_for_test(in);
        }
    }
}

// An empty value, with or without whitespace, is one line: not folding.
TEST(ServerSession, AcceptsEmptyHeaderValuesWhateverTheSplit) {
    for (const std::string& in :
         {"GET / HTTP/1.1\r\nX:\r\nHost: h\r\n\r\n"s, "GET / HTTP/1.1\r\nHost: h\r\nX: \t \r\nY:\r\n\r\n"s}) {
        const auto o = drive_whole(in);
        ASSERT_EQ(o.requests.size(), 1u) << printable_for_test(in) << ": " << o.error_reason;
        EXPECT_EQ(drive_bytewise(in).requests, o.requests) << printable_for_test(in);
        for (std::size_t cut = 1; cut < in.size(); ++cut) {
            ASSERT_EQ(drive(in, {cut}).requests, o.requests)
                << "cut at " << cut << ": " << printable_for_test(in);
        }
    }
}

// Whitespace inside and around a value is not folding.
TEST(ServerSession, KeepsInnerWhitespaceAndDropsOuterWhitespaceOfAValue) {
    const std::string in = "GET / HTTP/1.1\r\nHost: h\r\nX: \t a  b\t \r\n\r\n";
    const auto o = drive_whole(in);
    ASSERT_EQ(o.requests.size(), 1u) << o.error_reason;
    EXPECT_EQ(drive_bytewise(in).requests, o.requests);
}

// --- keep-alive (RFC 9112 §9.3) ---

struct keep_alive_case {
    const char* version;
    const char* connection; // nullptr: no Connection header
    bool keep_alive;
    friend std::ostream& operator<<(std::ostream& os, const keep_alive_case& c) {
        return os << "HTTP/" << c.version << " Connection: " << (c.connection ? c.connection : "(none)");
    }
};

class ServerSessionKeepAlive : public ::testing::TestWithParam<keep_alive_case> {};

TEST_P(ServerSessionKeepAlive, FollowsVersionAndConnectionHeader) {
    const keep_alive_case c = GetParam();
    std::string in = "GET / HTTP/"s + c.version + "\r\nHost: h\r\n";
    if (c.connection != nullptr) {
        in += "Connection: "s + c.connection + "\r\n";
    }
    in += "\r\n";
    const auto o = drive_whole(in);
    ASSERT_EQ(o.requests.size(), 1u) << in;
    EXPECT_EQ(o.requests[0].keep_alive, c.keep_alive) << in;
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, ServerSessionKeepAlive,
    ::testing::Values(keep_alive_case{"1.1", nullptr, true}, keep_alive_case{"1.1", "close", false},
                      keep_alive_case{"1.1", "Close", false}, keep_alive_case{"1.1", "keep-alive", true},
                      keep_alive_case{"1.1", "keep-alive, close", false},
                      keep_alive_case{"1.1", "foo, close", false}, keep_alive_case{"1.1", "Upgrade", true},
                      keep_alive_case{"1.0", nullptr, false}, keep_alive_case{"1.0", "keep-alive", true},
                      keep_alive_case{"1.0", "Keep-Alive", true}, keep_alive_case{"1.0", "close", false},
                      keep_alive_case{"1.0", "keep-alive, close", false}));

// --- Expect: 100-continue (RFC 9110 §10.1.1) ---

TEST(ServerSession, AsksForContinueOnceWhenTheBodyIsStillToCome) {
    server_session s{session_limits{}};
    request req;
    auto r = s.feed("PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", req);
    EXPECT_EQ(r.status, feed_status::need_more);
    EXPECT_EQ(s.current_phase(), phase::body);
    EXPECT_TRUE(s.take_continue());
    EXPECT_FALSE(s.take_continue());
    r = s.feed("abc", req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_FALSE(s.take_continue());
    EXPECT_EQ(req.body(), "abc");
}

// Where the head ends: the point a client that waits for 100 Continue stops sending.
std::size_t head_end(std::string_view in) {
    return in.find("\r\n\r\n") + 4;
}

TEST(ServerSession, ContinueIsCaseInsensitiveAndWorksForChunkedBodies) {
    const std::string in =
        "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nTransfer-Encoding: chunked\r\n\r\n"
        "1\r\nx\r\n0\r\n\r\n";
    const auto o = drive(in, {head_end(in)});
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.continues, 1);
    EXPECT_EQ(o.requests[0].body, "x");
}

TEST(ServerSession, NoContinueWhenItIsNotNeeded) {
    // The whole body came with the head.
    EXPECT_EQ(drive_whole("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx")
                  .continues,
              0);
    // No body.
    EXPECT_EQ(
        drive("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n", {}).continues,
        0);
    // HTTP/1.0: the expectation MUST be ignored.
    const std::string http10 = "PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
    EXPECT_EQ(drive(http10, {head_end(http10)}).continues, 0);
    // Another expectation.
    const std::string other = "PUT / HTTP/1.1\r\nHost: h\r\nExpect: something\r\nContent-Length: 1\r\n\r\nx";
    EXPECT_EQ(drive(other, {head_end(other)}).continues, 0);
    // The control: the same 1.1 request split at the same place does ask.
    const std::string asks =
        "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
    EXPECT_EQ(drive(asks, {head_end(asks)}).continues, 1);
}

TEST(ServerSession, TheContinueFlagDoesNotLeakIntoTheNextRequest) {
    server_session s{session_limits{}};
    request req;
    const std::string first =
        "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx";
    ASSERT_EQ(s.feed(first, req).status, feed_status::request_ready);
    s.next_request();
    req.clear();
    EXPECT_EQ(s.feed("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", req).status,
              feed_status::need_more);
    EXPECT_FALSE(s.take_continue());
}

// next_request() starts the parser afresh, so what the previous request left in llhttp (a
// "close", a version) cannot change how the next bytes are read; whether to read them at
// all after a "close" is the connection's decision (RFC 9112 §9.6).
TEST(ServerSession, NextRequestStartsFromACleanParser) {
    server_session s{session_limits{}};
    request req;
    ASSERT_EQ(s.feed("GET /a HTTP/1.0\r\n\r\n", req).status, feed_status::request_ready);
    EXPECT_FALSE(req.keep_alive());
    s.next_request();
    req.clear();
    const std::string next = "GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
    const auto r = s.feed(next, req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, next.size());
    EXPECT_EQ(req.path(), "/b");
    EXPECT_TRUE(req.keep_alive());
}

// --- fail() ---

TEST(ServerSession, FailPutsTheSessionInFailedForGood) {
    server_session s{session_limits{}};
    request req;
    s.feed("GET / HTTP/1.1\r\n", req);
    s.fail(408, "header timeout");
    EXPECT_EQ(s.current_phase(), phase::failed);
    EXPECT_EQ(s.error_status(), 408);
    EXPECT_EQ(s.error_reason(), "header timeout");
    const auto r = s.feed("Host: h\r\n\r\n", req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(r.consumed, 0u);
    s.next_request();
    EXPECT_EQ(s.current_phase(), phase::failed);
}

// --- splitting: the parsed request never depends on where reads end ---

const std::vector<std::string>& split_corpus() {
    static const std::vector<std::string> corpus = {
        "GET /users/42?fields=name&x=%20y HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: wrk\r\n"
        "Accept: */*\r\nX-Trim:  padded \t\r\n\r\n",
        "POST /form HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, "
        "world!",
        "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n"
        "7\r\n, world\r\nA;flag\r\n0123456789\r\n0\r\nTrailer-One: 1\r\nTrailer-Two: 2\r\n\r\n",
        "\r\nGET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        "HEAD / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        "DELETE /item/7 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
    };
    return corpus;
}

TEST(ServerSessionSplit, EverySplitPointGivesTheSameRequest) {
    for (const std::string& in : split_corpus()) {
        const auto whole = drive_whole(in);
        ASSERT_EQ(whole.requests.size(), 1u) << in;
        ASSERT_EQ(whole.ends.back(), in.size());
        for (std::size_t cut = 1; cut < in.size(); ++cut) {
            const auto split = drive(in, {cut});
            ASSERT_EQ(split.requests, whole.requests) << "cut at " << cut << " of\n" << in;
            ASSERT_EQ(split.ends, whole.ends) << "cut at " << cut;
        }
    }
}

TEST(ServerSessionSplit, TwoSplitPointsGiveTheSameRequest) {
    const std::string& in = split_corpus()[2];
    const auto whole = drive_whole(in);
    for (std::size_t a = 1; a < in.size(); ++a) {
        for (std::size_t b = a + 1; b < in.size(); b += 3) {
            ASSERT_EQ(drive(in, {a, b}).requests, whole.requests) << "cuts " << a << ", " << b;
        }
    }
}

TEST(ServerSessionSplit, OneByteAtATimeGivesTheSameRequest) {
    for (const std::string& in : split_corpus()) {
        const auto whole = drive_whole(in);
        const auto bytewise = drive_bytewise(in);
        EXPECT_EQ(bytewise.requests, whole.requests) << in;
        EXPECT_EQ(bytewise.last, feed_status::need_more);
    }
}

TEST(ServerSessionSplit, TheCorpusParsesToWhatWasSent) {
    const auto o = drive_whole(split_corpus()[2]);
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].body, "hello, world0123456789");
    const auto g = drive_whole(split_corpus()[0]);
    ASSERT_EQ(g.requests.size(), 1u);
    EXPECT_EQ(g.requests[0].headers.back(), (std::pair<std::string, std::string>{"X-Trim", "padded"}));
}

} // namespace
} // namespace sluice::http::test
