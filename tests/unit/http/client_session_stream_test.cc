// The client session with a response_sink (streamed calls): the head once, the body in
// pieces that add up to the wire's body, and max_response_bytes bounding the head only — fed
// whole, in 7-byte pieces and one byte at a time.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "http/client_session.h"

namespace sluice::http {
namespace {

struct sink final : response_sink {
    int heads = 0;
    int status = 0;
    std::string body;
    void on_response_head(client_response& head) noexcept override {
        ++heads;
        status = head.status;
    }
    void on_response_body(std::string_view bytes) noexcept override { body.append(bytes); }
};

struct stream_outcome {
    response_phase phase = response_phase::idle;
    std::error_code error;
    sink s;
    std::size_t consumed = 0;
    client_response res;
};

void parse(std::string_view wire, std::size_t piece, std::size_t max, bool head, stream_outcome& o,
           std::size_t head_max = 0) {
    client_session s(max, head_max == 0 ? max : head_max);
    s.begin(head, o.res, &o.s);
    for (std::size_t i = 0; i < wire.size(); i += piece) {
        const std::size_t n = s.feed(wire.substr(i, piece));
        o.consumed += n;
        if (n == 0 || s.phase() == response_phase::complete || s.phase() == response_phase::failed) {
            break;
        }
    }
    o.phase = s.phase();
    o.error = s.error();
}

class client_session_stream_test : public ::testing::TestWithParam<std::size_t> {};

TEST_P(client_session_stream_test, a_body_larger_than_max_response_bytes_streams_through) {
    const std::string body(5000, 'x');
    const std::string wire =
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + body;
    stream_outcome o;
    parse(wire, GetParam(), 200, false, o);
    EXPECT_EQ(o.phase, response_phase::complete) << o.error.message();
    EXPECT_EQ(o.s.heads, 1); // the 100 is not shown
    EXPECT_EQ(o.s.status, 200);
    EXPECT_EQ(o.s.body, body);
    EXPECT_TRUE(o.res.body.empty()); // not kept
    EXPECT_EQ(o.consumed, wire.size());
}

TEST_P(client_session_stream_test, chunked_body_pieces_add_up) {
    const std::string wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
                             "chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n";
    stream_outcome o;
    parse(wire, GetParam(), 100, false, o);
    EXPECT_EQ(o.phase, response_phase::complete) << o.error.message();
    EXPECT_EQ(o.s.body, "abc0123456789abcdef");
}

TEST_P(client_session_stream_test, a_head_over_max_response_bytes_still_fails) {
    const std::string wire =
        "HTTP/1.1 200 OK\r\nX-Big: " + std::string(300, 'y') + "\r\nContent-Length: 1\r\n\r\nz";
    stream_outcome o;
    parse(wire, GetParam(), 200, false, o);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, make_error_code(client_errc::response_too_large));
    EXPECT_EQ(o.s.heads, 0);
}

// The head alone has a limit of its own, the interim responses before it included: a streamed
// body may be any size, its head may not (the gateway passes it on whole).
TEST_P(client_session_stream_test, a_head_over_max_head_bytes_fails_however_large_the_body_may_be) {
    const std::string interim = "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
    const std::string final_head =
        "HTTP/1.1 200 OK\r\nX-Big: " + std::string(100, 'y') + "\r\nContent-Length: 3\r\n\r\n";
    const std::string wire = interim + final_head + "abc";
    const std::size_t head_bytes = interim.size() + final_head.size();
    stream_outcome ok;
    parse(wire, GetParam(), 1 << 20, false, ok, head_bytes);
    EXPECT_EQ(ok.phase, response_phase::complete) << ok.error.message();
    EXPECT_EQ(ok.s.body, "abc");
    EXPECT_EQ(ok.consumed, wire.size());
    stream_outcome o;
    parse(wire, GetParam(), 1 << 20, false, o, head_bytes - 1);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, make_error_code(client_errc::response_too_large));
    EXPECT_EQ(o.s.heads, 0);
    // A flood of interim responses is a head without end.
    std::string flood;
    while (flood.size() < 10'000) {
        flood += "HTTP/1.1 100 Continue\r\n\r\n";
    }
    stream_outcome f;
    parse(flood + final_head + "abc", GetParam(), 1 << 20, false, f, 4096);
    EXPECT_EQ(f.phase, response_phase::failed);
    EXPECT_EQ(f.error, make_error_code(client_errc::response_too_large));
}

TEST_P(client_session_stream_test, a_response_to_head_shows_its_head_and_no_body) {
    const std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n";
    stream_outcome o;
    parse(wire, GetParam(), 200, true, o);
    EXPECT_EQ(o.phase, response_phase::complete) << o.error.message();
    EXPECT_EQ(o.s.heads, 1);
    EXPECT_TRUE(o.s.body.empty());
}

// RFC 9112 §6.3 (1): a 1xx response ends with its header section, whatever it says about a
// body. Bytes after it are the next response; here they are not one. Found by the
// client_response fuzz target: the 100's "body" was streamed ahead of the final head.
TEST_P(client_session_stream_test, a_1xx_response_has_no_body_whatever_its_framing_says) {
    const std::string wire =
        "HTTP/1.1 100 Continue\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    stream_outcome o;
    parse(wire, GetParam(), 1000, false, o);
    EXPECT_EQ(o.phase, response_phase::failed);
    EXPECT_EQ(o.error, make_error_code(client_errc::malformed_response));
    EXPECT_EQ(o.s.heads, 0);
    EXPECT_TRUE(o.s.body.empty()) << o.s.body;
}

// A sink that asks, in every on_response_head, for the body to be held (a streamed call whose
// body is paused when its head arrives).
struct holding_sink final : response_sink {
    client_session* session = nullptr;
    int heads = 0;
    std::string body;
    void on_response_head(client_response&) noexcept override {
        ++heads;
        session->hold_body();
    }
    void on_response_body(std::string_view bytes) noexcept override { body.append(bytes); }
};

struct held_outcome {
    bool held = false;
    std::string body_at_hold; // what the sink had when feed() stopped
    std::string body;
    response_phase phase = response_phase::idle;
    std::error_code error;
    std::size_t consumed = 0;
};

// Feeds `wire` in pieces until the session holds the body, then releases it and feeds the rest
// (what feed() did not take first); `eof`: the stream ends after the wire.
held_outcome parse_held(std::string_view wire, std::size_t piece, std::size_t max, bool eof) {
    client_session s(max, max);
    client_response res;
    holding_sink k;
    k.session = &s;
    s.begin(false, res, &k);
    held_outcome o;
    while (o.consumed < wire.size() && !s.holding()) {
        const std::string_view p = wire.substr(o.consumed, piece);
        const std::size_t n = s.feed(p);
        o.consumed += n;
        if (n < p.size() || s.phase() == response_phase::failed) {
            break;
        }
    }
    o.held = s.holding();
    o.body_at_hold = k.body;
    s.release();
    while (o.consumed < wire.size() && s.phase() == response_phase::body) {
        const std::size_t n = s.feed(wire.substr(o.consumed, piece));
        if (n == 0) {
            break;
        }
        o.consumed += n;
    }
    if (eof) {
        s.finish();
    }
    o.body = k.body;
    o.phase = s.phase();
    o.error = s.error();
    return o;
}

TEST_P(client_session_stream_test, a_held_body_is_parsed_only_after_the_hold_and_whole) {
    struct wire_case {
        std::string wire;
        std::string body;
        bool eof;
    };
    const wire_case cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello", false},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "abcde",
         false},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", "until the end", true},
        {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "", false}, // ends at release()
        {"HTTP/1.1 204 No Content\r\n\r\n", "", false},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", "", true}, // ends at finish()
    };
    for (const auto& c : cases) {
        const held_outcome o = parse_held(c.wire, GetParam(), 1000, c.eof);
        EXPECT_TRUE(o.held) << c.wire;
        EXPECT_EQ(o.body_at_hold, "") << c.wire;
        EXPECT_EQ(o.phase, response_phase::complete) << c.wire << ": " << o.error.message();
        EXPECT_EQ(o.body, c.body) << c.wire;
        EXPECT_EQ(o.consumed, c.wire.size()) << c.wire;
    }
}

// A hold does not make a body of what follows a 204's or a 304's head.
TEST_P(client_session_stream_test, a_held_no_content_response_ends_at_release_whatever_it_declares) {
    for (const std::string head : {"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                                   "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"}) {
        const held_outcome o = parse_held(head + "hello", GetParam(), 1000, false);
        EXPECT_TRUE(o.held) << head;
        EXPECT_EQ(o.phase, response_phase::complete) << head << ": " << o.error.message();
        EXPECT_EQ(o.body, "") << head;
        EXPECT_EQ(o.consumed, head.size()) << head;
    }
}

TEST_P(client_session_stream_test, a_held_body_is_not_counted_against_max_response_bytes) {
    const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n";
    const std::string body(3000, 'b');
    const held_outcome o = parse_held(head + body, GetParam(), head.size() + 10, false);
    EXPECT_TRUE(o.held);
    EXPECT_EQ(o.phase, response_phase::complete) << o.error.message();
    EXPECT_EQ(o.body, body);
}

INSTANTIATE_TEST_SUITE_P(pieces, client_session_stream_test, ::testing::Values(std::size_t{1} << 20, 7, 1));

} // namespace
} // namespace sluice::http
