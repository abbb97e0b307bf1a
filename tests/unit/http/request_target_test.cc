// How a request-target becomes path() and query(): origin-form and absolute-form
// (RFC 9112 §3.2.1-3.2.2), parsed through the real session.
#include <gtest/gtest.h>

#include <string>

#include <sluice/request.h>

#include "http/server_session.h"

namespace sluice::http {
namespace {

struct target_case {
    std::string target;
    std::string path;
    std::string query;
};

class request_target : public ::testing::TestWithParam<target_case> {};

TEST_P(request_target, splits_into_path_and_query) {
    server_session s(session_limits{});
    request req;
    const std::string in = "GET " + GetParam().target + " HTTP/1.1\r\nHost: example.com\r\n\r\n";
    const auto r = s.feed(in, req);
    ASSERT_EQ(r.status, feed_status::request_ready) << s.error_reason();
    EXPECT_EQ(req.target(), GetParam().target);
    EXPECT_EQ(req.path(), GetParam().path);
    EXPECT_EQ(req.query(), GetParam().query);
}

INSTANTIATE_TEST_SUITE_P(forms, request_target,
                         ::testing::Values(target_case{"/", "/", ""},
                                           target_case{"/a/b?x=1&y", "/a/b", "x=1&y"},
                                           target_case{"/a?", "/a", ""}, target_case{"/?q", "/", "q"},
                                           target_case{"http://example.com/a/b?x=1", "/a/b", "x=1"},
                                           target_case{"HTTP://Example.com:8080/a", "/a", ""},
                                           target_case{"https://example.com/", "/", ""},
                                           target_case{"http://example.com", "/", ""},
                                           target_case{"http://example.com?x=1", "/", "x=1"}));

TEST(request_target, a_reused_request_forgets_the_previous_target) {
    server_session s(session_limits{});
    request req;
    ASSERT_EQ(s.feed("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", req).status, feed_status::request_ready);
    EXPECT_EQ(req.path(), "/");
    req.clear();
    s.next_request();
    ASSERT_EQ(s.feed("GET /x?y HTTP/1.1\r\nHost: h\r\n\r\n", req).status, feed_status::request_ready);
    EXPECT_EQ(req.path(), "/x");
    EXPECT_EQ(req.query(), "y");
}

} // namespace
} // namespace sluice::http
