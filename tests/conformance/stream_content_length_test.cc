// A streamed response with a declared length (response::content_length) on every backend ×
// dispatch mode × {plain, tls}: the head carries Content-Length and no Transfer-Encoding, the
// pieces go out raw, and the connection is never left out of step with the framing:
// - exactly the declared bytes (in one dispatch, across suspensions, through complete(r)):
//   keep-alive holds and the next request gets its own answer;
// - more than declared: the excess is never sent and the exchange fails (connection closed);
// - fewer than declared: the client gets what was written, then the connection closes;
// - HEAD, 204, HTTP/1.0 (with and without keep-alive), a handler's own Content-Length header,
//   and a length too large to ever be reached.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/next_request.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class stream_content_length_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        route_next(srv());
    }

    /// The response must be cut: the connection closes after `head` + `body_prefix`, the head
    /// declares `declared` bytes, and nothing else (no second response, no excess) arrives.
    static void expect_cut(test_client& c, std::string_view declared, std::string_view body_prefix) {
        ASSERT_TRUE(c.wait_closed()) << c.error();
        const std::string& raw = c.buffered();
        const std::size_t head_end = raw.find("\r\n\r\n");
        ASSERT_NE(head_end, std::string::npos) << printable(raw);
        const std::string_view head = std::string_view(raw).substr(0, head_end + 4);
        EXPECT_NE(head.find("\r\nContent-Length: " + std::string(declared) + "\r\n"), std::string_view::npos)
            << printable(head);
        EXPECT_EQ(head.find("Transfer-Encoding"), std::string_view::npos) << printable(head);
        EXPECT_EQ(std::string_view(raw).substr(head_end + 4), body_prefix) << printable(raw);
        const auto parsed = parse_response(raw, true);
        EXPECT_EQ(parsed.status, parse_status::malformed) << "a cut body must not look whole";
    }

    /// The declared body is whole on the wire, and then the connection closes: nothing follows.
    static void expect_whole_then_closed(test_client& c, std::string_view body) {
        ASSERT_TRUE(c.wait_closed()) << c.error();
        const std::string& raw = c.buffered();
        const std::size_t head_end = raw.find("\r\n\r\n");
        ASSERT_NE(head_end, std::string::npos) << printable(raw);
        EXPECT_EQ(std::string_view(raw).substr(head_end + 4), body) << printable(raw);
    }

    static void expect_identity(const http_response& r, std::string_view length) {
        EXPECT_EQ(r.header("Content-Length"), std::string(length));
        EXPECT_EQ(r.header_count("Content-Length"), 1u);
        EXPECT_FALSE(r.header("Transfer-Encoding"));
        EXPECT_FALSE(r.chunked);
        EXPECT_FALSE(r.delimited_by_close);
    }
};

TEST_P(stream_content_length_test, declared_length_written_in_one_dispatch_keeps_the_connection) {
    srv().route("GET", "/s", [](exchange& ex) {
        ex.response().content_type("text/plain").content_length(11);
        ex.response().write("hello ").write("world");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    expect_identity(*r, "11");
    EXPECT_EQ(r->body, "hello world");
    expect_next_answered(c);
}

TEST_P(stream_content_length_test, declared_length_across_suspensions_goes_out_raw_and_keeps_the_connection) {
    srv().route("GET", "/s", [this](exchange& ex) {
        if (!ex.is_resumed()) {
            ex.response().content_length(11).write("hello ");
            contexts_.add(ex.start_async(milliseconds(5000)));
            return; // the head and "hello " go out as the handler suspends
        }
        ex.response().write("world");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("\r\n\r\nhello ")) << c.error();
    EXPECT_EQ(c.buffered().find("Transfer-Encoding"), std::string::npos) << printable(c.buffered());
    EXPECT_NE(c.buffered().find("Content-Length: 11\r\n"), std::string::npos) << printable(c.buffered());
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).resume());
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    expect_identity(*r, "11");
    EXPECT_EQ(r->body, "hello world");
    expect_next_answered(c);
}

TEST_P(stream_content_length_test, a_handed_response_with_a_declared_length_goes_out_as_declared) {
    srv().route("GET", "/s", [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(5000))); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).complete(response(200).content_length(3).body("abc")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    expect_identity(*r, "3");
    EXPECT_EQ(r->body, "abc");
    expect_next_answered(c);
}

TEST_P(stream_content_length_test, writing_more_than_declared_in_one_dispatch_sends_no_excess_and_closes) {
    srv().route("GET", "/s", [](exchange& ex) { ex.response().content_length(5).write("too long"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s") + get_request("/next"))) << c.error();
    // The pipelined /next is never answered: the connection closes after the head.
    expect_cut(c, "5", "");
    EXPECT_TRUE(srv().log().wait_for("Content-Length"));
}

TEST_P(stream_content_length_test, writing_more_than_declared_after_a_suspension_fails_the_exchange_at_once) {
    srv().route("GET", "/s", [this](exchange& ex) {
        if (!ex.is_resumed()) {
            ex.response().content_length(8).write("abcd");
            auto ctx = ex.start_async(milliseconds(5000));
            contexts_.add(ctx);
            return;
        }
        ex.response().write("efghij"); // 10 of 8
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        contexts_.add(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("\r\n\r\nabcd")) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).resume());
    // The exchange fails as its handler suspends: it would never end well, so it does not wait.
    expect_cut(c, "8", "abcd");
    ASSERT_TRUE(events_.wait_for_count(2));
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_EQ(events_.events().front().error, make_error_code(exchange_errc::content_length_mismatch));
    ASSERT_TRUE(contexts_.wait_for(2));
    EXPECT_FALSE(contexts_.at(1).complete(response(200).text("late")));
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(stream_content_length_test, writing_more_than_declared_when_completing_sends_no_excess_and_closes) {
    srv().route("GET", "/s", [this](exchange& ex) {
        ex.response().content_length(4).write("abcd");
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        contexts_.add(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("\r\n\r\nabcd")) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    // The body is whole on the wire; the handed body would be excess: never sent, and the
    // connection closes instead of carrying it (or anything after it).
    EXPECT_TRUE(contexts_.at(0).complete(response(200).text("excess")));
    expect_whole_then_closed(c, "abcd");
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(events_.sequence(), "complete");
    EXPECT_EQ(events_.events().front().error, make_error_code(exchange_errc::content_length_mismatch));
}

TEST_P(stream_content_length_test, fewer_bytes_than_declared_closes_after_what_was_written) {
    srv().route("GET", "/s", [this](exchange& ex) {
        ex.response().content_length(10).write("abc");
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        contexts_.add(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("\r\n\r\nabc")) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).complete());
    expect_cut(c, "10", "abc");
    ASSERT_TRUE(events_.wait_for_count(1));
    EXPECT_EQ(events_.events().front().error, make_error_code(exchange_errc::content_length_mismatch));
}

TEST_P(stream_content_length_test, fewer_bytes_in_one_dispatch_closes_too) {
    srv().route("GET", "/s", [](exchange& ex) { ex.response().content_length(10).write("abc"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s") + get_request("/next"))) << c.error();
    expect_cut(c, "10", "abc");
}

TEST_P(stream_content_length_test, a_length_no_body_can_reach_is_cut_like_any_short_body) {
    srv().route("GET", "/s", [](exchange& ex) {
        ex.response().content_length(std::numeric_limits<std::uint64_t>::max()).write("abc");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    expect_cut(c, "18446744073709551615", "abc");
}

TEST_P(stream_content_length_test, head_gets_the_declared_length_and_no_body) {
    srv().route("GET", "/s", [](exchange& ex) { ex.response().content_length(10).write("0123456789"); });
    srv().route("GET", "/unwritten", [](exchange& ex) { ex.response().content_length(10); });
    srv().start();
    test_client c(srv().port());
    for (const char* target : {"/s", "/unwritten"}) {
        ASSERT_TRUE(c.send("HEAD " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n")) << c.error();
        auto r = c.read_response(body_rule::head_request);
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->header("Content-Length"), "10") << target;
        EXPECT_FALSE(r->header("Transfer-Encoding")) << target;
    }
    expect_next_answered(c);
}

TEST_P(stream_content_length_test, a_204_with_a_declared_length_sends_its_head_only) {
    srv().route("GET", "/s",
                [](exchange& ex) { ex.response().status(204).content_length(7).write("dropped"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 204);
    EXPECT_FALSE(r->header("Content-Length"));
    EXPECT_FALSE(r->header("Transfer-Encoding"));
    expect_next_answered(c);
}

TEST_P(stream_content_length_test, http10_keep_alive_holds_with_a_declared_length) {
    srv().route("GET", "/s", [](exchange& ex) { ex.response().content_length(5).write("ab").write("cde"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET /s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    expect_identity(*r, "5");
    EXPECT_EQ(r->header("Connection"), "keep-alive");
    EXPECT_EQ(r->body, "abcde");
    ASSERT_TRUE(c.send("GET /next HTTP/1.0\r\n\r\n")) << c.error();
    auto next = c.read_response();
    ASSERT_TRUE(next) << c.error();
    EXPECT_EQ(next->body, "next");
    EXPECT_TRUE(c.wait_closed()) << "HTTP/1.0 without keep-alive closes";
}

TEST_P(stream_content_length_test, http10_without_keep_alive_gets_the_length_then_a_close) {
    srv().route("GET", "/s", [](exchange& ex) { ex.response().content_length(5).write("abcde"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET /s HTTP/1.0\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    expect_identity(*r, "5");
    EXPECT_EQ(r->body, "abcde");
    EXPECT_TRUE(c.wait_closed());
}

TEST_P(stream_content_length_test, a_handler_content_length_header_cannot_contradict_the_declared_one) {
    srv().route("GET", "/s", [](exchange& ex) {
        ex.response().header("Content-Length", "2").content_length(5).add_header("Content-Length", "9");
        ex.response().header("Transfer-Encoding", "chunked");
        ex.response().write("abcde");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    expect_identity(*r, "5");
    EXPECT_EQ(r->body, "abcde");
    expect_next_answered(c);
}

SLUICE_BACKEND_SUITE(stream_content_length_test);

} // namespace
} // namespace sluice::test
