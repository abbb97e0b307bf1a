// Limits: the head (431), the request line (414), the body declared or received (413),
// chunk extensions and trailers, each exactly at and one past the boundary.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "http/server_session.h"
#include "http/session_driver.h"

namespace sluice::http::test {
namespace {

// A GET whose head (request line through the final CRLF) is exactly `n` bytes.
std::string head_of_size(std::size_t n) {
    const std::string start = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: ";
    const std::string end = "\r\n\r\n";
    return start + std::string(n - start.size() - end.size(), 'p') + end;
}

// A request line of exactly `n` bytes, CRLF included.
std::string request_line_of_size(std::size_t n) {
    const std::string fixed = "GET / HTTP/1.1\r\n";
    return "GET /" + std::string(n - fixed.size(), 'a') + " HTTP/1.1\r\n";
}

/// Drives `in` whole, byte by byte and split at every point; returns the common error status
/// (0 when all three parsed exactly one request).
int status_whatever_the_split(const std::string& in, const session_limits& limits) {
    const auto whole = drive_whole(in, limits);
    const int status = whole.error_status;
    EXPECT_EQ(whole.requests.size(), status == 0 ? 1u : 0u);
    EXPECT_EQ(drive_bytewise(in, limits).error_status, status) << "byte by byte";
    for (std::size_t cut = 1; cut < in.size(); ++cut) {
        EXPECT_EQ(drive(in, {cut}, limits).error_status, status) << "cut at " << cut;
    }
    return status;
}

TEST(ServerSessionLimits, HeadExactlyAtTheLimitIsAccepted) {
    for (const std::size_t limit : {64u, 100u, 8192u}) {
        const std::string in = head_of_size(limit);
        ASSERT_EQ(in.size(), limit);
        EXPECT_EQ(status_whatever_the_split(in, header_limit(limit)), 0) << limit;
    }
}

TEST(ServerSessionLimits, HeadOneByteOverTheLimitIs431) {
    for (const std::size_t limit : {64u, 100u, 8192u}) {
        EXPECT_EQ(status_whatever_the_split(head_of_size(limit + 1), header_limit(limit)), 431) << limit;
    }
}

TEST(ServerSessionLimits, TheDefaultHeaderLimitIs8KiB) {
    EXPECT_EQ(drive_whole(head_of_size(8192)).requests.size(), 1u);
    EXPECT_EQ(drive_whole(head_of_size(8193)).error_status, 431);
}

TEST(ServerSessionLimits, FailsAsSoonAsTheLimitIsReachedWithoutTheHeadComplete) {
    const std::string in = head_of_size(101);
    server_session s{header_limit(100)};
    request req;
    // Exactly the limit's worth: the head is not complete, so it is too large already.
    const feed_result r = s.feed(std::string_view{in}.substr(0, 100), req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(r.consumed, 100u);
    EXPECT_EQ(s.error_status(), 431);
}

TEST(ServerSessionLimits, BodyBytesDoNotCountAgainstTheHeadLimit) {
    const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 200\r\n\r\n";
    const auto o = drive_whole(head + std::string(200, 'b'), header_limit(head.size()));
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].body.size(), 200u);
}

TEST(ServerSessionLimits, EachPipelinedRequestHasItsOwnHeadBudget) {
    const std::string one = head_of_size(80);
    const auto o = drive_whole(one + one + one, header_limit(80));
    EXPECT_EQ(o.requests.size(), 3u);
    EXPECT_EQ(o.last, feed_status::need_more);
}

TEST(ServerSessionLimits, AZeroHeaderLimitRefusesTheFirstByte) {
    server_session s{header_limit(0)};
    request req;
    const feed_result r = s.feed("GET / HTTP/1.1\r\n", req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(r.consumed, 0u);
    EXPECT_EQ(s.error_status(), 414);
}

// --- 414: the request line alone ---

TEST(ServerSessionLimits, RequestLineOverTheLimitIs414) {
    for (const std::size_t limit : {32u, 100u, 8192u}) {
        const std::string in = request_line_of_size(limit + 1) + "Host: h\r\n\r\n";
        EXPECT_EQ(status_whatever_the_split(in, header_limit(limit)), 414) << limit;
    }
}

TEST(ServerSessionLimits, RequestLineThatFitsButHeadThatDoesNotIs431) {
    for (const std::size_t limit : {32u, 100u, 8192u}) {
        const std::string in = request_line_of_size(limit) + "Host: h\r\n\r\n";
        EXPECT_EQ(status_whatever_the_split(in, header_limit(limit)), 431) << limit;
    }
}

TEST(ServerSessionLimits, AnEndlessTargetIs414WithoutWaitingForTheRest) {
    server_session s{header_limit(64)};
    request req;
    const std::string in = "GET /" + std::string(100, 'a');
    const feed_result r = s.feed(in, req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(r.consumed, 64u);
    EXPECT_EQ(s.error_status(), 414);
}

// --- 413: the body ---

std::string post_with_length(std::size_t n, std::string_view extra_headers = {}) {
    return "POST / HTTP/1.1\r\nHost: h\r\n" + std::string(extra_headers) +
           "Content-Length: " + std::to_string(n) + "\r\n\r\n";
}

TEST(ServerSessionLimits, DeclaredBodyExactlyAtTheLimitIsAccepted) {
    const auto o = drive_whole(post_with_length(1000) + std::string(1000, 'x'), body_limit(1000));
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].body.size(), 1000u);
}

TEST(ServerSessionLimits, DeclaredBodyOverTheLimitIs413BeforeAnyBodyByte) {
    server_session s{body_limit(1000)};
    request req;
    const std::string head = post_with_length(1001);
    const feed_result r = s.feed(head, req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(s.error_status(), 413);
    EXPECT_EQ(status_whatever_the_split(head, body_limit(1000)), 413);
}

TEST(ServerSessionLimits, OverTheLimitWithExpectGets413InsteadOfContinue) {
    server_session s{body_limit(10)};
    request req;
    s.feed(post_with_length(11, "Expect: 100-continue\r\n"), req);
    EXPECT_FALSE(s.take_continue());
    EXPECT_EQ(s.error_status(), 413);
}

TEST(ServerSessionLimits, AZeroBodyLimitStillAllowsRequestsWithoutBody) {
    EXPECT_EQ(drive_whole("GET / HTTP/1.1\r\nHost: h\r\n\r\n", body_limit(0)).requests.size(), 1u);
    EXPECT_EQ(drive_whole(post_with_length(0), body_limit(0)).requests.size(), 1u);
    EXPECT_EQ(drive_whole(post_with_length(1) + "x", body_limit(0)).error_status, 413);
}

const std::string chunked_head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";

// A chunked request whose one chunk carries an extension "name=value" of these sizes.
std::string chunk_head_with_extension(std::size_t name, std::size_t value) {
    return chunked_head + "1;" + std::string(name, 'n') + "=" + std::string(value, 'v') +
           "\r\nx\r\n0\r\n\r\n";
}

// A chunked request whose trailer section (its fields and the empty line that ends them) is
// exactly `n` bytes.
std::string chunked_with_trailer_section(std::size_t n) {
    const std::string start = "X-Pad: ";
    const std::string end = "\r\n\r\n";
    return chunked_head + "1\r\nx\r\n0\r\n" + start + std::string(n - start.size() - end.size(), 'p') + end;
}

TEST(ServerSessionLimits, ChunkedBodyExactlyAtTheLimitIsAccepted) {
    const std::string in = chunked_head + "6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n";
    EXPECT_EQ(status_whatever_the_split(in, body_limit(10)), 0);
    EXPECT_EQ(drive_whole(in, body_limit(10)).requests[0].body, "abcdefghij");
}

TEST(ServerSessionLimits, ChunkedBodyOnePastTheLimitIs413) {
    const std::string in = chunked_head + "6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n";
    EXPECT_EQ(status_whatever_the_split(in, body_limit(10)), 413);
}

TEST(ServerSessionLimits, AnOversizedChunkIsRefusedAtItsSizeLine) {
    server_session s{body_limit(100)};
    request req;
    const std::string in = chunked_head + "ffffff\r\n";
    const feed_result r = s.feed(in, req);
    EXPECT_EQ(r.status, feed_status::failed);
    EXPECT_EQ(s.error_status(), 413);
    EXPECT_TRUE(req.body().empty());
}

TEST(ServerSessionLimits, ChunkExtensionsAreLimited) {
    const session_limits limits = header_limit(100);
    // The extension's name and value bytes: 50 + 50 fit, 50 + 51 do not.
    const std::string at = chunk_head_with_extension(50, 50);
    EXPECT_EQ(status_whatever_the_split(at, limits), 0);
    EXPECT_EQ(status_whatever_the_split(chunk_head_with_extension(50, 51), limits), 413);
}

TEST(ServerSessionLimits, ATrailerSectionExactlyAtTheHeaderLimitIsAccepted) {
    for (const std::size_t limit : {64u, 100u}) {
        EXPECT_EQ(status_whatever_the_split(chunked_with_trailer_section(limit), header_limit(limit)), 0)
            << limit;
    }
}

TEST(ServerSessionLimits, ATrailerSectionOneByteOverTheHeaderLimitIs431) {
    for (const std::size_t limit : {64u, 100u}) {
        EXPECT_EQ(status_whatever_the_split(chunked_with_trailer_section(limit + 1), header_limit(limit)),
                  431)
            << limit;
    }
}

TEST(ServerSessionLimits, EveryByteOfATrailerSectionCounts) {
    // Colons, line ends and whitespace count, not only names and values: 30 short fields of 4
    // bytes, or one field padded with 200 spaces, are over a limit of 100.
    std::string fields;
    for (int i = 0; i < 30; ++i) {
        fields += "a:\r\n";
    }
    EXPECT_EQ(
        status_whatever_the_split(chunked_head + "1\r\nx\r\n0\r\n" + fields + "\r\n", header_limit(100)),
        431);
    EXPECT_EQ(
        status_whatever_the_split(chunked_head + "1\r\nx\r\n0\r\nX-T:" + std::string(200, ' ') + "v\r\n\r\n",
                                  header_limit(100)),
        431);
}

TEST(ServerSessionLimits, AnEndlessTrailerSectionFailsAtTheLimitWithoutItsEnd) {
    server_session s{header_limit(100)};
    request req;
    std::string in = chunked_head + "1\r\nx\r\n0\r\n";
    for (int i = 0; i < 100; ++i) {
        in += "a:\r\n"; // no empty line: the section never ends
    }
    EXPECT_EQ(s.feed(in, req).status, feed_status::failed);
    EXPECT_EQ(s.error_status(), 431);
}

} // namespace
} // namespace sluice::http::test
