// sluice-load's command line and request building.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "options.h"
#include "request.h"
#include "runner.h"

namespace sluice::load {
namespace {

load_options parse(std::vector<std::string_view> a) {
    return parse_options(a);
}

TEST(LoadOptions, JMeterShapedPlan) {
    auto o = parse({"--users", "1500", "--ramp-up", "5", "--duration", "23", "--timeout", "30", "-H",
                    "X-A:  b", "--no-keep-alive", "--json", "http://127.0.0.1:8080/api/async/work?ms=3000"});
    EXPECT_EQ(o.users, 1500u);
    EXPECT_DOUBLE_EQ(o.ramp_up_s, 5);
    EXPECT_DOUBLE_EQ(o.duration_s, 23);
    EXPECT_EQ(o.loops, 0u);
    EXPECT_EQ(o.timeout.count(), 30000);
    ASSERT_EQ(o.headers.size(), 1u);
    EXPECT_EQ(o.headers[0].name, "X-A");
    EXPECT_EQ(o.headers[0].value, "b");
    EXPECT_FALSE(o.keep_alive);
    EXPECT_EQ(o.format, output_format::json);
    EXPECT_EQ(o.host, "127.0.0.1:8080");
    EXPECT_EQ(o.target, "/api/async/work?ms=3000");
    EXPECT_EQ(o.label, "GET http://127.0.0.1:8080/api/async/work?ms=3000");
}

TEST(LoadOptions, UrlForms) {
    std::string h, t;
    bool tls = true;
    parse_url("http://example.org", h, t, tls);
    EXPECT_EQ(h, "example.org:80");
    EXPECT_EQ(t, "/");
    EXPECT_FALSE(tls);
    parse_url("http://[::1]:9000/x", h, t, tls);
    EXPECT_EQ(h, "[::1]:9000");
    EXPECT_EQ(t, "/x");
    parse_url("http://[::1]/x", h, t, tls);
    EXPECT_EQ(h, "[::1]:80");
    parse_url("https://example.org/y", h, t, tls);
    EXPECT_EQ(h, "example.org:443");
    EXPECT_EQ(t, "/y");
    EXPECT_TRUE(tls);
    parse_url("https://[::1]:8443", h, t, tls);
    EXPECT_EQ(h, "[::1]:8443");
    EXPECT_THROW(parse_url("ftp://a/", h, t, tls), std::invalid_argument);
    EXPECT_THROW(parse_url("http:///x", h, t, tls), std::invalid_argument);
    EXPECT_THROW(parse_url("https:///x", h, t, tls), std::invalid_argument);
}

TEST(LoadOptions, HttpsOptions) {
    auto o = parse({"--loops", "1", "--cacert", "/etc/ca.pem", "https://127.0.0.1:8443/x"});
    EXPECT_TRUE(o.tls);
    EXPECT_EQ(o.ca_file, "/etc/ca.pem");
    EXPECT_FALSE(o.insecure);
    EXPECT_EQ(o.label, "GET https://127.0.0.1:8443/x");
    EXPECT_TRUE(parse({"--loops", "1", "-k", "https://a/"}).insecure);
    // TLS options without TLS, or both ways of trusting at once, are mistakes to point out.
    EXPECT_THROW(parse({"--loops", "1", "--cacert", "c.pem", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--insecure", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "-k", "--cacert", "c.pem", "https://a/"}), std::invalid_argument);
}

TEST(LoadOptions, RejectsInconsistentPlans) {
    EXPECT_THROW(parse({"http://a/"}), std::invalid_argument); // no loops or duration
    EXPECT_THROW(parse({"--users", "0", "--loops", "1", "http://a/"}), std::invalid_argument); // no users
    EXPECT_THROW(parse({"--loops", "1"}), std::invalid_argument);                              // no URL
    EXPECT_THROW(parse({"--loops", "x", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--duration", "-1", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--duration", "5", "--ramp-up", "5", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--bogus", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "http://a/", "http://b/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--users"}), std::invalid_argument); // missing value
    EXPECT_THROW(parse({"--loops", "1", "-H", "novalue", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--window", "5:2", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--timeout", "0", "http://a/"}), std::invalid_argument);
    EXPECT_THROW(parse({"--loops", "1", "--body-file", "a", "--upload", "b", "http://a/"}),
                 std::invalid_argument);
}

TEST(LoadOptions, UploadDefaultsToPostAndBuildsMultipart) {
    const std::string path = ::testing::TempDir() + "sluice_load_upload.bin";
    {
        std::ofstream f(path, std::ios::binary);
        f << "abc\r\n--x";
    }
    auto o = parse({"--loops", "1", "--upload", path.c_str(), "--upload-field", "doc", "http://a:1/upload"});
    EXPECT_EQ(o.method, "POST");
    auto r = build_request(o);
    std::remove(path.c_str());
    ASSERT_EQ(r.headers.size(), 1u);
    const std::string& ct = r.headers[0].value;
    ASSERT_EQ(ct.rfind("multipart/form-data; boundary=", 0), 0u);
    const std::string boundary = ct.substr(ct.find('=') + 1);
    EXPECT_EQ(r.body, multipart_body(boundary, "doc", "sluice_load_upload.bin", "abc\r\n--x"));
    EXPECT_NE(r.body.find("name=\"doc\"; filename=\"sluice_load_upload.bin\""), std::string::npos);
    EXPECT_EQ(r.body.substr(r.body.size() - boundary.size() - 6), "--" + boundary + "--\r\n");
}

TEST(LoadOptions, MissingBodyFileIsAnError) {
    auto o = parse({"--loops", "1", "--body-file", "/nonexistent/sluice", "http://a:1/"});
    EXPECT_THROW(build_request(o), std::runtime_error);
}

TEST(LoadOptions, WireSizeOfARequest) {
    client_request r{.method = "GET", .target = "/x"};
    // "GET /x HTTP/1.1\r\n" (17) + "Host: a:1\r\n" (11) + "\r\n" (2)
    EXPECT_EQ(wire_size(r, "a:1"), 30u);
    r.body = "hello";
    // + "Content-Length: 5\r\n" (19) + 5
    EXPECT_EQ(wire_size(r, "a:1"), 54u);
}

TEST(LoadOptions, OutcomesAreClassified) {
    EXPECT_EQ(classify(result<client_response>(client_response{.status = 204})), error_kind::none);
    EXPECT_EQ(classify(result<client_response>(client_response{.status = 503})), error_kind::non_2xx);
    EXPECT_EQ(classify(result<client_response>(make_error_code(client_errc::refused))), error_kind::connect);
    EXPECT_EQ(classify(result<client_response>(make_error_code(client_errc::connect_timed_out))),
              error_kind::connect);
    EXPECT_EQ(classify(result<client_response>(make_error_code(client_errc::response_timed_out))),
              error_kind::timeout);
    EXPECT_EQ(classify(result<client_response>(make_error_code(client_errc::reset))), error_kind::reset);
    EXPECT_EQ(classify(result<client_response>(make_error_code(client_errc::malformed_response))),
              error_kind::other);
}

} // namespace
} // namespace sluice::load
