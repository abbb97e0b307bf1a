// Serialising upstream requests: Host, Content-Length, hop-by-hop headers dropped, unsafe
// fields refused.
#include <gtest/gtest.h>

#include <string>

#include "http/client_request_writer.h"

namespace sluice::http {
namespace {

TEST(client_request_writer, get_with_default_host) {
    client_request r;
    r.target = "/work?ms=1";
    std::string out;
    ASSERT_FALSE(write_request_head(r, "up:80", out));
    EXPECT_EQ(out, "GET /work?ms=1 HTTP/1.1\r\nHost: up:80\r\n\r\n");
}

TEST(client_request_writer, post_body_gets_content_length_and_own_host_wins) {
    client_request r{.method = "POST", .target = "/upload", .headers = {{"host", "example"}, {"X-Id", "7"}}};
    r.body = "abc";
    std::string out;
    ASSERT_FALSE(write_request_head(r, "up:80", out));
    EXPECT_EQ(out, "POST /upload HTTP/1.1\r\nHost: example\r\nX-Id: 7\r\nContent-Length: 3\r\n\r\n");
    r.body.clear();
    out.clear();
    ASSERT_FALSE(write_request_head(r, "up:80", out));
    EXPECT_NE(out.find("Content-Length: 0\r\n"), std::string::npos);
}

TEST(client_request_writer, says_where_the_default_host_went_so_a_connection_can_aim_it) {
    client_request r{.target = "/x", .headers = {{"X-Id", "7"}}};
    std::string out = "kept:";
    std::size_t at = 0;
    ASSERT_FALSE(write_request_head(r, "10.0.0.5:8080", out, &at));
    EXPECT_EQ(out.substr(at, 13), "10.0.0.5:8080");
    EXPECT_EQ(out.substr(at + 13, 2), "\r\n");
    // The request's own Host: nothing to aim.
    r.headers.push_back({"Host", "svc.example"});
    out.clear();
    ASSERT_FALSE(write_request_head(r, "10.0.0.5:8080", out, &at));
    EXPECT_EQ(at, std::string::npos);
    EXPECT_EQ(out, "GET /x HTTP/1.1\r\nHost: svc.example\r\nX-Id: 7\r\n\r\n");
}

TEST(client_request_writer, borrowed_body_is_used) {
    const std::string incoming = "borrowed";
    client_request r{.method = "PUT", .target = "/x"};
    r.body = "ignored";
    r.body_view = incoming;
    EXPECT_EQ(request_body(r), "borrowed");
    std::string out;
    ASSERT_FALSE(write_request_head(r, "h", out));
    EXPECT_NE(out.find("Content-Length: 8\r\n"), std::string::npos);
}

TEST(client_request_writer, hop_by_hop_headers_are_not_forwarded) {
    client_request r{.target = "/",
                     .headers = {{"Connection", "keep-alive, X-Secret"},
                                 {"Keep-Alive", "timeout=5"},
                                 {"TE", "trailers"},
                                 {"Trailer", "x"},
                                 {"Upgrade", "websocket"},
                                 {"Proxy-Authorization", "Basic x"},
                                 {"Proxy-Connection", "keep-alive"},
                                 {"Transfer-Encoding", "chunked"},
                                 {"Content-Length", "99"},
                                 {"x-secret", "1"},
                                 {"X-Kept", "yes"}}};
    std::string out;
    ASSERT_FALSE(write_request_head(r, "h", out));
    EXPECT_EQ(out, "GET / HTTP/1.1\r\nHost: h\r\nX-Kept: yes\r\n\r\n");
}

TEST(client_request_writer, unsafe_requests_are_refused) {
    std::vector<client_request> bad = {
        {.method = "GE T"},
        {.method = ""},
        {.target = "no-slash"},
        {.target = "/a b"},
        {.target = "/\x7f"},
        {.target = "/", .headers = {{"X", "a\r\nInjected: 1"}}},
        {.target = "/", .headers = {{"X", std::string("a\0b", 3)}}},
        {.target = "/", .headers = {{"Bad Name", "v"}}},
        {.target = "/", .headers = {{"", "v"}}},
    };
    for (const auto& r : bad) {
        std::string out;
        EXPECT_EQ(write_request_head(r, "h", out), client_errc::invalid_request)
            << r.method << " " << r.target;
        EXPECT_TRUE(out.empty());
    }
}

TEST(client_request_writer, idempotent_methods) {
    for (const char* m : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
        EXPECT_TRUE(is_idempotent(m)) << m;
    }
    for (const char* m : {"POST", "PATCH", "CONNECT", "get"}) {
        EXPECT_FALSE(is_idempotent(m)) << m;
    }
}

} // namespace
} // namespace sluice::http

namespace sluice {
namespace {

TEST(hop_by_hop_header, fixed_names_proxy_prefix_and_connection_tokens) {
    const std::vector<client_header> h = {{"Connection", "close, X-Private"}, {"X-Private", "1"}};
    for (const char* n : {"Connection", "keep-alive", "TE", "Trailer", "Upgrade", "Transfer-Encoding",
                          "Proxy-Authenticate", "x-private"}) {
        EXPECT_TRUE(is_hop_by_hop_header(n, h)) << n;
    }
    for (const char* n : {"Content-Length", "Content-Type", "X-Other", "Proxy"}) {
        EXPECT_FALSE(is_hop_by_hop_header(n, h)) << n;
    }
}

} // namespace
} // namespace sluice
