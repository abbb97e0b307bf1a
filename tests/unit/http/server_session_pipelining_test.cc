// Pipelining: feed() stops exactly after each request, so a batch is answered in order by
// re-feeding from the consumed offset; chunked bodies (extensions, trailers) in and
// between pipelined requests.
#include <gtest/gtest.h>

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/request.h>

#include "http/server_session.h"
#include "http/session_driver.h"

namespace sluice::http::test {
namespace {

std::string get(std::string_view path) {
    return "GET " + std::string(path) + " HTTP/1.1\r\nHost: h\r\n\r\n";
}

std::string post(std::string_view path, std::string_view body) {
    return "POST " + std::string(path) +
           " HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           std::string(body);
}

std::string chunked(std::string_view path, const std::vector<std::string>& chunks,
                    std::string_view trailers = {}) {
    std::string out =
        "POST " + std::string(path) + " HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const auto& c : chunks) {
        char size[20];
        const auto r = std::to_chars(size, size + sizeof size, c.size(), 16);
        out.append(size, r.ptr);
        out += "\r\n" + c + "\r\n";
    }
    return out + "0\r\n" + std::string(trailers) + "\r\n";
}

TEST(ServerSessionPipelining, StopsExactlyAfterEachRequestOfABatch) {
    const std::string a = get("/a");
    const std::string b = get("/b");
    const std::string c = get("/c");
    const std::string batch = a + b + c;
    server_session s{session_limits{}};
    request req;

    std::size_t off = 0;
    std::vector<std::string> paths;
    std::vector<std::size_t> consumed;
    while (off < batch.size()) {
        const feed_result r = s.feed(std::string_view{batch}.substr(off), req);
        ASSERT_EQ(r.status, feed_status::request_ready);
        consumed.push_back(r.consumed);
        paths.emplace_back(req.path());
        off += r.consumed;
        req.clear();
        s.next_request();
    }
    EXPECT_EQ(paths, (std::vector<std::string>{"/a", "/b", "/c"}));
    EXPECT_EQ(consumed, (std::vector<std::size_t>{a.size(), b.size(), c.size()}));
}

TEST(ServerSessionPipelining, AnswersAMixedBatchOfSixteenInOrder) {
    std::string batch;
    std::vector<std::size_t> ends;
    for (int i = 0; i < 16; ++i) {
        const std::string path = "/" + std::to_string(i);
        switch (i % 4) {
        case 0:
            batch += get(path);
            break;
        case 1:
            batch += post(path, "body " + std::to_string(i));
            break;
        case 2:
            batch += chunked(path, {"chunk ", std::to_string(i)}, "X-Trailer: t\r\n");
            break;
        default:
            batch += "HEAD " + path + " HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n";
            break;
        }
        ends.push_back(batch.size());
    }
    const auto o = drive_whole(batch);
    ASSERT_EQ(o.requests.size(), 16u);
    EXPECT_EQ(o.ends, ends);
    EXPECT_EQ(o.last, feed_status::need_more);
    for (int i = 0; i < 16; ++i) {
        const auto& r = o.requests[static_cast<std::size_t>(i)];
        EXPECT_EQ(r.path, "/" + std::to_string(i));
        switch (i % 4) {
        case 1:
            EXPECT_EQ(r.body, "body " + std::to_string(i));
            break;
        case 2:
            EXPECT_EQ(r.body, "chunk " + std::to_string(i));
            break;
        default:
            EXPECT_TRUE(r.body.empty());
            break;
        }
    }
    EXPECT_EQ(drive_bytewise(batch).requests, o.requests);
}

TEST(ServerSessionPipelining, ABatchSplitAnywhereGivesTheSameRequests) {
    const std::string batch =
        get("/1") + post("/2", "two") + chunked("/3", {"th", "ree"}, "T: 3\r\n") + get("/4");
    const auto whole = drive_whole(batch);
    ASSERT_EQ(whole.requests.size(), 4u);
    for (std::size_t cut = 1; cut < batch.size(); ++cut) {
        const auto split = drive(batch, {cut});
        ASSERT_EQ(split.requests, whole.requests) << "cut at " << cut;
        ASSERT_EQ(split.ends, whole.ends) << "cut at " << cut;
    }
}

TEST(ServerSessionPipelining, APartialNextRequestWaitsForItsRest) {
    const std::string first = get("/first");
    const std::string second = get("/second");
    const std::string in = first + second.substr(0, 10);
    server_session s{session_limits{}};
    request req;
    auto r = s.feed(in, req);
    ASSERT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, first.size());

    s.next_request();
    req.clear();
    r = s.feed(std::string_view{in}.substr(first.size()), req);
    EXPECT_EQ(r.status, feed_status::need_more);
    EXPECT_EQ(r.consumed, 10u);
    EXPECT_EQ(s.current_phase(), phase::head);
    r = s.feed(std::string_view{second}.substr(10), req);
    EXPECT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(req.path(), "/second");
}

TEST(ServerSessionPipelining, ARequestWithConnectionCloseStillStopsAtItsEnd) {
    // The session reports the request and its keep_alive() == false; whether the pipelined
    // bytes after it are read is the connection's decision (it closes).
    const std::string first = "GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    server_session s{session_limits{}};
    request req;
    const auto r = s.feed(first + get("/ignored"), req);
    ASSERT_EQ(r.status, feed_status::request_ready);
    EXPECT_EQ(r.consumed, first.size());
    EXPECT_FALSE(req.keep_alive());
}

// --- chunked bodies (RFC 9112 §7.1) ---

TEST(ServerSessionChunked, DecodesChunksOfEverySize) {
    const std::string big(300, 'z');
    const auto o = drive_whole(chunked("/", {"a", "bc", big, "d"}));
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].body, "abc" + big + "d");
}

TEST(ServerSessionChunked, AcceptsUpperAndLowerCaseHexAndLeadingZeros) {
    const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    const auto o = drive_whole(head + "A\r\n0123456789\r\nb\r\nabcdefghijk\r\n0003\r\nxyz\r\n0\r\n\r\n");
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_EQ(o.requests[0].body, "0123456789abcdefghijkxyz");
}

TEST(ServerSessionChunked, AnEmptyChunkedBodyIsJustTheLastChunk) {
    const auto o = drive_whole(chunked("/", {}));
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_TRUE(o.requests[0].body.empty());
}

TEST(ServerSessionChunked, IgnoresChunkExtensions) {
    const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const std::string ext : {";flag", ";name=value", ";q=\"quoted value\"", ";a;b;c"}) {
        const std::string in = head + "3" + ext + "\r\nabc\r\n2" + ext + "\r\nde\r\n0" + ext + "\r\n\r\n";
        const auto o = drive_whole(in);
        ASSERT_EQ(o.requests.size(), 1u) << ext << ": " << o.error_reason;
        EXPECT_EQ(o.requests[0].body, "abcde") << ext;
        EXPECT_EQ(drive_bytewise(in).requests, o.requests) << ext;
    }
}

// RFC 9110 §6.5.1: trailer fields are not merged into the header section.
TEST(ServerSessionChunked, DropsTrailerFields) {
    const auto o = drive_whole(chunked("/", {"data"}, "Trailer-One: 1\r\nHost: evil\r\n") + get("/next"));
    ASSERT_EQ(o.requests.size(), 2u);
    EXPECT_EQ(o.requests[0].body, "data");
    ASSERT_EQ(o.requests[0].headers.size(), 2u);
    EXPECT_EQ(o.requests[0].headers[0].second, "h");
    EXPECT_EQ(o.requests[1].path, "/next");
}

TEST(ServerSessionChunked, ABodyCutShortWaitsInTheBodyPhase) {
    // The connection, not the session, decides what a peer leaving mid-body means (it closes:
    // nobody is owed an answer); the session only has to say where the request stopped.
    server_session s{session_limits{}};
    request req;
    const std::string in = chunked("/", {"abcdef"});
    EXPECT_EQ(s.feed(std::string_view{in}.substr(0, in.size() - 3), req).status, feed_status::need_more);
    EXPECT_EQ(s.current_phase(), phase::body);
}

} // namespace
} // namespace sluice::http::test
