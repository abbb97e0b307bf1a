// The proxy helpers of forwarding.h: hop-by-hop fields never cross, in either direction;
// X-Forwarded-For / Forwarded are appended; unsafe requests are refused.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <sluice/forwarding.h>

#include "http/request_builder.h"
#include "http/server_session.h"

namespace sluice {
namespace {

std::vector<std::string> names(const std::vector<client_header>& hs) {
    std::vector<std::string> out;
    for (const auto& h : hs) {
        out.push_back(h.name);
    }
    return out;
}

// A request as the server parses it (the session fills it from raw bytes).
request parse(const std::string& raw, std::string_view peer = "10.1.2.3:4567") {
    request req;
    http::server_session s{http::session_limits{}};
    const auto r = s.feed(raw, req);
    EXPECT_EQ(r.status, http::feed_status::request_ready) << s.error_reason();
    detail::request_builder(req).set_remote_address(std::string(peer));
    return req;
}

TEST(Forwarding, StripsEveryHopByHopFieldAndThoseNamedInConnection) {
    std::vector<client_header> hs{{"Connection", "keep-alive, X-Secret , Upgrade"},
                                  {"Keep-Alive", "timeout=5"},
                                  {"TE", "trailers"},
                                  {"Trailer", "X-T"},
                                  {"Transfer-Encoding", "chunked"},
                                  {"Upgrade", "websocket"},
                                  {"Proxy-Authenticate", "Basic"},
                                  {"Proxy-Authorization", "Basic eA=="},
                                  {"Proxy-Connection", "keep-alive"},
                                  {"x-secret", "1"},
                                  {"Accept", "*/*"},
                                  {"Set-Cookie", "a=1"},
                                  {"Set-Cookie", "b=2"}};
    strip_hop_by_hop(hs);
    EXPECT_EQ(names(hs), (std::vector<std::string>{"Accept", "Set-Cookie", "Set-Cookie"}));
    EXPECT_EQ(hs[2].value, "b=2");
}

TEST(Forwarding, ConnectionListsAreCaseInsensitiveAndMayRepeat) {
    std::vector<client_header> hs{{"connection", "close"}, {"CONNECTION", "X-A"}, {"x-a", "1"}, {"X-B", "2"}};
    EXPECT_TRUE(is_hop_by_hop_header("X-A", hs));
    EXPECT_FALSE(is_hop_by_hop_header("X-B", hs));
    strip_hop_by_hop(hs);
    EXPECT_EQ(names(hs), (std::vector<std::string>{"X-B"}));
}

TEST(Forwarding, ForwardableHeadersDropHostAndFramingAndCarryTheHostOn) {
    const request req = parse("POST /u HTTP/1.1\r\nHost: front.example\r\nContent-Length: 2\r\n"
                              "Connection: X-Hop\r\nX-Hop: 1\r\nAccept: a\r\nTE: trailers\r\n\r\nhi");
    const auto hs = forwardable_headers(req);
    EXPECT_EQ(names(hs), (std::vector<std::string>{"Accept", "X-Forwarded-Host"}));
    EXPECT_EQ(hs[1].value, "front.example");
}

// By the time a handler forwards the request, this hop has met a 100-continue expectation
// (the whole body is here): passing it on would let an upstream that refuses expectations (417)
// fail a request already sent in full. Other expectations go on.
TEST(Forwarding, AMetHundredContinueExpectationIsNotForwarded) {
    const request req = parse("POST /u HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n"
                              "Accept: a\r\n\r\nhi");
    EXPECT_EQ(names(forwardable_headers(req)), (std::vector<std::string>{"Accept", "X-Forwarded-Host"}));
    const request other = parse("GET /u HTTP/1.1\r\nHost: h\r\nExpect: something-else\r\n\r\n");
    EXPECT_EQ(names(forwardable_headers(other)), (std::vector<std::string>{"Expect", "X-Forwarded-Host"}));
}

// X-Forwarded-Host has no chain, unlike X-Forwarded-For: an upstream reading it trusts the
// one value, so a client's own (a spoofed host for the upstream's links and redirects) never
// goes on ahead of ours; without a Host of its own the request carries none.
TEST(Forwarding, AClientsForwardedHostIsReplacedByTheHostThisHopReceived) {
    const request req = parse("GET /u HTTP/1.1\r\nX-Forwarded-Host: evil.example\r\nHost: "
                              "front.example\r\nx-forwarded-host: b\r\n\r\n");
    const auto hs = forwardable_headers(req);
    ASSERT_EQ(names(hs), (std::vector<std::string>{"X-Forwarded-Host"}));
    EXPECT_EQ(hs[0].value, "front.example");
    const request old = parse("GET /u HTTP/1.0\r\nX-Forwarded-Host: evil.example\r\n\r\n");
    EXPECT_TRUE(forwardable_headers(old).empty());
}

// RFC 9112 §3.2.2: with an absolute-form target the authority in it is the host, not Host.
TEST(Forwarding, AnAbsoluteFormTargetNamesTheForwardedHost) {
    const request req = parse("GET http://target.example:8080/u?q HTTP/1.1\r\nHost: other.example\r\n\r\n");
    const auto hs = forwardable_headers(req);
    ASSERT_EQ(names(hs), (std::vector<std::string>{"X-Forwarded-Host"}));
    EXPECT_EQ(hs[0].value, "target.example:8080");
}

TEST(Forwarding, AppendsTheIpv4PeerToForwardedForFields) {
    std::vector<client_header> hs;
    append_forwarded_for(hs, "10.1.2.3:4567");
    ASSERT_EQ(hs.size(), 2u);
    EXPECT_EQ(hs[0].name, "X-Forwarded-For");
    EXPECT_EQ(hs[0].value, "10.1.2.3");
    EXPECT_EQ(hs[1].name, "Forwarded");
    EXPECT_EQ(hs[1].value, "for=10.1.2.3");
}

TEST(Forwarding, AppendsToTheLastExistingFieldsAndQuotesIpv6) {
    std::vector<client_header> hs{{"X-Forwarded-For", "1.1.1.1"},
                                  {"x-forwarded-for", "2.2.2.2"},
                                  {"Forwarded", "for=1.1.1.1;proto=http"}};
    append_forwarded_for(hs, "[2001:db8::7]:443");
    ASSERT_EQ(hs.size(), 3u);
    EXPECT_EQ(hs[0].value, "1.1.1.1");
    EXPECT_EQ(hs[1].value, "2.2.2.2, 2001:db8::7");
    EXPECT_EQ(hs[2].value, "for=1.1.1.1;proto=http, for=\"[2001:db8::7]\"");
}

TEST(Forwarding, PeerHostDropsThePort) {
    EXPECT_EQ(peer_host("127.0.0.1:80"), "127.0.0.1");
    EXPECT_EQ(peer_host("[::1]:80"), "::1");
    EXPECT_EQ(peer_host("::1"), "::1");
    EXPECT_EQ(peer_host(""), "");
}

TEST(Forwarding, OrdinaryRequestsAreForwardable) {
    EXPECT_FALSE(forwarding_refusal(parse("GET /a?b=c HTTP/1.1\r\nHost: h\r\nX: a\tb\r\n\r\n")));
    const request abs = parse("GET http://h.example/p?q=1 HTTP/1.1\r\nHost: h.example\r\n\r\n");
    EXPECT_FALSE(forwarding_refusal(abs));
    EXPECT_EQ(origin_target(abs), "/p?q=1");
    EXPECT_EQ(origin_target(parse("GET http://h.example HTTP/1.1\r\nHost: h.example\r\n\r\n")), "/");
    EXPECT_EQ(origin_target(parse("GET http://h.example?x HTTP/1.1\r\nHost: h.example\r\n\r\n")), "/?x");
}

TEST(Forwarding, UnsafeRequestsAreRefused) {
    EXPECT_TRUE(forwarding_refusal(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n")));
    {
        // CONNECT: whether or not the server's parser takes it, it is never forwarded.
        request req;
        detail::request_builder b(req);
        b.append_method("CONNECT");
        b.append_target("h:443");
        EXPECT_TRUE(forwarding_refusal(req));
    }
    // Whatever the parser lets through, a control byte in a value or a name that is not a
    // token is refused (built directly: the server's parser may already reject them).
    for (const auto& [name, value] :
         {std::pair{"X", "a\x01b"}, std::pair{"X", "a\x7f"}, std::pair{"X Y", "v"}}) {
        request req = parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        detail::request_builder b(req);
        b.begin_header();
        b.append_header_name(name);
        b.append_header_value(value);
        b.finish_header();
        EXPECT_TRUE(forwarding_refusal(req)) << name;
    }
}

TEST(Forwarding, CopyResponseKeepsEndToEndFieldsOnly) {
    client_response up;
    up.status = 201;
    up.headers = {{"Content-Length", "2"}, {"Connection", "close, X-Hop"},
                  {"X-Hop", "1"},          {"Transfer-Encoding", "chunked"},
                  {"ETag", "\"e\""},       {"Set-Cookie", "a=1"},
                  {"Set-Cookie", "b=2"}};
    up.body = "ok";
    response r;
    copy_response(up, r);
    EXPECT_EQ(r.status(), 201);
    EXPECT_EQ(r.raw_headers(), "ETag: \"e\"\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
    EXPECT_EQ(r.body(), "ok");
    EXPECT_FALSE(r.is_streaming()) << "a whole body is sent whole";
    EXPECT_FALSE(r.content_length());
}

TEST(Forwarding, CopyResponseDeclaresALengthThatCameWithoutItsBody) {
    // The answer to a HEAD (or a 304, or a streamed call's head): its Content-Length is the
    // body's that did not come, and must reach the client as it is (RFC 9110 §9.3.2).
    client_response up;
    up.status = 200;
    up.headers = {{"Content-Length", "300001"}, {"Content-Type", "text/plain"}};
    response r;
    copy_response(up, r);
    EXPECT_EQ(r.content_length(), 300'001u);
    EXPECT_TRUE(r.is_streaming());
    EXPECT_EQ(r.raw_headers(), "Content-Type: text/plain\r\n");
    EXPECT_TRUE(r.body().empty());

    // The same length with its body: whole, framed by the server.
    up.body = std::string(300'001, 'x');
    response whole;
    copy_response(std::move(up), whole);
    EXPECT_FALSE(whole.content_length());
    EXPECT_FALSE(whole.is_streaming());
    EXPECT_EQ(whole.body().size(), 300'001u);

    // Length 0, a length that is not a number, none: nothing declared.
    for (const char* v : {"0", "12x", ""}) {
        client_response odd;
        if (*v != '\0') {
            odd.headers = {{"Content-Length", v}};
        }
        response out;
        copy_response(odd, out);
        EXPECT_FALSE(out.content_length()) << v;
        EXPECT_FALSE(out.is_streaming()) << v;
    }
}

TEST(Forwarding, CopyResponseDeclaresNoLengthForAHeadThatCameWithout) {
    // The answer to a HEAD whose GET would be chunked (or end with the connection): no length
    // is known, and framing the empty body would tell the client Content-Length: 0 (RFC 9110
    // §9.3.2). As a stream, the head goes out chunked, and without a body for HEAD.
    for (const bool chunked : {true, false}) {
        client_response up;
        up.status = 200;
        up.headers = {{"Content-Type", "text/plain"}};
        if (chunked) {
            up.headers.push_back({"Transfer-Encoding", "chunked"});
        }
        response r;
        copy_response(up, r, "HEAD");
        EXPECT_TRUE(r.is_streaming()) << chunked;
        EXPECT_FALSE(r.content_length()) << chunked;
        EXPECT_EQ(r.raw_headers(), "Content-Type: text/plain\r\n");
        EXPECT_TRUE(r.body().empty());
        response moved;
        copy_response(client_response(up), moved, "HEAD");
        EXPECT_TRUE(moved.is_streaming()) << chunked;

        // A GET's empty body is the whole body, whatever framed it: Content-Length: 0.
        response get;
        copy_response(up, get, "GET");
        EXPECT_FALSE(get.is_streaming()) << chunked;
        response unnamed;
        copy_response(up, unnamed);
        EXPECT_FALSE(unnamed.is_streaming()) << chunked;
    }
    // A HEAD answered with a length keeps it (0 included), and 204/304 have no content.
    client_response zero;
    zero.status = 200;
    zero.headers = {{"Content-Length", "0"}};
    response r0;
    copy_response(zero, r0, "HEAD");
    EXPECT_FALSE(r0.is_streaming()) << "a declared 0 is a length";
    for (int status : {204, 304}) {
        client_response none;
        none.status = status;
        response out;
        copy_response(none, out, "HEAD");
        EXPECT_FALSE(out.is_streaming()) << status;
    }
}

TEST(Forwarding, ContentLengthOfReadsAPlainDecimalWithin64BitsOnly) {
    client_response up;
    EXPECT_FALSE(content_length_of(up));
    up.headers = {{"content-length", "18446744073709551615"}};
    EXPECT_EQ(content_length_of(up), 18'446'744'073'709'551'615u);
    for (const char* v : {"18446744073709551616", "-1", "+1", " 1", "1 ", "0x10", ""}) {
        up.headers = {{"Content-Length", v}};
        EXPECT_FALSE(content_length_of(up)) << '"' << v << '"';
    }
}

} // namespace
} // namespace sluice
