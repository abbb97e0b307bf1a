// The access log on every backend × dispatch mode: one line per request, written by the time
// the server has stopped, and a log that cannot be written never stops the serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::size_t lines_with(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        n += line.find(part) != std::string::npos ? 1U : 0U;
    }
    return n;
}

class access_log_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        path_ = "/tmp/sluice_access_" + std::to_string(::getpid()) + ".log";
        std::remove(path_.c_str());
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    }
    void TearDown() override {
        backend_test::TearDown();
        std::remove(path_.c_str());
    }

    void make_requests(int n) {
        test_client c(srv().port());
        for (int i = 0; i < n; ++i) {
            ASSERT_TRUE(c.send(get_request("/?i=" + std::to_string(i), "User-Agent: t\"q\r\n"))) << c.error();
            auto r = c.read_response();
            ASSERT_TRUE(r) << c.error();
            ASSERT_EQ(r->status, 200);
        }
    }

    std::string path_;
};

TEST_P(access_log_test, one_combined_line_per_request) {
    srv().config().access_log.path = path_;
    srv().start();
    make_requests(20);
    srv().stop();
    const std::string text = read_file(path_);
    EXPECT_EQ(lines_with(text, "\"GET /?i="), 20U) << text;
    EXPECT_EQ(lines_with(text, "127.0.0.1 - - ["), 20U);
    EXPECT_EQ(lines_with(text, "HTTP/1.1\" 200 5 \"-\" \"t\\x22q\""), 20U) << text;
}

TEST_P(access_log_test, json_lines) {
    srv().config().access_log.path = path_;
    srv().config().access_log.format = "json";
    srv().start();
    make_requests(3);
    srv().stop();
    const std::string text = read_file(path_);
    EXPECT_EQ(lines_with(text, "{\"time\":\""), 3U) << text;
    EXPECT_EQ(lines_with(text, "\"status\":200,\"bytes\":5,"), 3U) << text;
}

TEST_P(access_log_test, a_log_that_cannot_be_written_is_counted_and_reported_and_serving_goes_on) {
    srv().config().access_log.path = "/dev/full";
    srv().config().admin.listen = "127.0.0.1:0";
    srv().start();
    make_requests(10);
    EXPECT_TRUE(srv().log().wait_for("access log cannot write '/dev/full'"));
    test_client a(srv().server().admin_port());
    std::string m;
    ASSERT_TRUE(wait_until([&] {
        test_client c(srv().server().admin_port());
        if (!c.send(get_request("/metrics", "Connection: close\r\n"))) {
            return false;
        }
        auto r = c.read_response();
        m = r ? r->body : "";
        return m.find("\nsluice_access_log_write_errors_total 10\n") != std::string::npos;
    })) << m;
    make_requests(1); // still serving
}

SLUICE_BACKEND_SUITE(access_log_test);

} // namespace
} // namespace sluice::test
