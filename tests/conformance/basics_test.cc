// Request/response basics on every backend × dispatch mode: status codes the router and the
// engine produce, HEAD, HTTP/1.0, Connection: close, byte-at-a-time requests.
#include <gtest/gtest.h>

#include <stdexcept>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

class basics_test : public backend_test {
protected:
    void start_with_routes() {
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().route("GET", "/users/{id}", [](exchange& ex) {
            ex.response().text("user " + std::string(ex.request().path_param("id").value_or("?")) +
                               " q=" + ex.request().query_param("q").value_or("-"));
        });
        srv().route("POST", "/users/{id}", [](exchange& ex) { ex.response().status(201).text("made"); });
        srv().route("GET", "/throws", [](exchange&) -> void { throw std::runtime_error("boom"); });
        srv().route("GET", "/header", [](exchange& ex) {
            ex.response().text(std::string(ex.request().header("x-Test-Header").value_or("absent")));
        });
        srv().start();
    }
};

TEST_P(basics_test, get_root) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->version, "HTTP/1.1");
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->reason, "OK");
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(r->header("Content-Length"), "5");
    EXPECT_EQ(r->header("content-type"), "text/plain; charset=utf-8");
    EXPECT_TRUE(r->header("Date").has_value());
    EXPECT_FALSE(r->header("Transfer-Encoding").has_value());
}

TEST_P(basics_test, path_and_query_parameters_are_decoded) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/users/a%20b?q=x+y"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "user a b q=x y");
}

TEST_P(basics_test, request_headers_are_case_insensitive) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/header", "X-TEST-HEADER: yes\r\n"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "yes");
}

TEST_P(basics_test, absolute_form_target_is_accepted) {
    // RFC 9112 §3.2.2: "a server MUST accept the absolute-form in requests".
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET http://test/users/5?q=z HTTP/1.1\r\nHost: test\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "user 5 q=z");
}

TEST_P(basics_test, unknown_path_is_404) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/nope"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 404);
    // A 404 is an ordinary answer: the connection stays usable.
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto again = c.read_response();
    ASSERT_TRUE(again) << c.error();
    EXPECT_EQ(again->status, 200);
}

TEST_P(basics_test, wrong_method_is_405_with_allow) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(body_request("DELETE", "/users/7", ""))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 405);
    const auto allow = r->header("Allow");
    ASSERT_TRUE(allow.has_value());
    EXPECT_NE(allow->find("GET"), std::string::npos) << *allow;
    EXPECT_NE(allow->find("POST"), std::string::npos) << *allow;
    EXPECT_NE(allow->find("HEAD"), std::string::npos) << *allow;
}

TEST_P(basics_test, options_asterisk_is_answered_by_the_server_with_every_method_it_routes) {
    // RFC 9110 §9.3.7: "OPTIONS *" asks about the server in general; a successful answer with no
    // content MUST carry Content-Length: 0, and SHOULD say which features apply (Allow).
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Content-Length"), "0");
    EXPECT_EQ(r->body, "");
    EXPECT_EQ(r->header("Allow"), "GET, HEAD, POST");
    // An ordinary answer: the connection stays usable.
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto again = c.read_response();
    ASSERT_TRUE(again) << c.error();
    EXPECT_EQ(again->body, "hello");
}

TEST_P(basics_test, an_asterisk_target_with_another_method_is_400) {
    // RFC 9112 §3.2.4: the asterisk-form is only used with OPTIONS.
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET * HTTP/1.1\r\nHost: t\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 400);
}

TEST_P(basics_test, head_sends_content_length_of_get_and_no_body) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")) << c.error();
    auto r = c.read_response(body_rule::head_request);
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Content-Length"), "5");
    // Any body bytes would now sit in front of the next response and break it.
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto next = c.read_response();
    ASSERT_TRUE(next) << c.error();
    EXPECT_EQ(next->status, 200);
    EXPECT_EQ(next->body, "hello");
}

TEST_P(basics_test, http10_closes_by_default) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET / HTTP/1.0\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(r->version.substr(0, 7), "HTTP/1.");
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(c.buffered().empty()) << printable(c.buffered());
}

TEST_P(basics_test, http10_keep_alive_when_asked) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    ASSERT_TRUE(r->header("Connection").has_value());
    EXPECT_TRUE(same_name(*r->header("Connection"), "keep-alive"));
    ASSERT_TRUE(c.send("GET /users/2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")) << c.error();
    auto second = c.read_response();
    ASSERT_TRUE(second) << c.error();
    EXPECT_EQ(second->body, "user 2 q=-");
}

TEST_P(basics_test, connection_close_is_honoured) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/", "Connection: close\r\n"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    ASSERT_TRUE(r->header("Connection").has_value());
    EXPECT_TRUE(same_name(*r->header("Connection"), "close"));
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

TEST_P(basics_test, request_sent_one_byte_at_a_time) {
    start_with_routes();
    test_client c(srv().port());
    const std::string req = body_request("POST", "/users/9", "abc", "X-Extra: 1\r\n");
    ASSERT_TRUE(c.send_split(req, 1)) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "made");
}

TEST_P(basics_test, handler_that_throws_gives_500) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/throws"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 500);
    EXPECT_TRUE(srv().log().wait_for("boom")) << "the exception's message should be logged";
}

TEST_P(basics_test, unknown_method_is_501) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("BREW / HTTP/1.1\r\nHost: t\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 501);
}

TEST_P(basics_test, unknown_transfer_coding_is_501) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("POST /users/1 HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                       "0\r\n\r\n"))
        << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 501);
}

TEST_P(basics_test, http_major_version_2_is_505) {
    start_with_routes();
    test_client c(srv().port());
    ASSERT_TRUE(c.send("GET / HTTP/2.0\r\nHost: t\r\n\r\n")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 505);
}

SLUICE_BACKEND_SUITE(basics_test);

} // namespace
} // namespace sluice::test
