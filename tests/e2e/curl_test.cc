// End to end with a real client: the curl binary against sluice on every registered backend
// × dispatch mode × {plain, tls} (https with the run's own CA). curl is an independent HTTP/1.1
// implementation, so these tests catch what a test client written alongside the server might share with it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/process.h"
#include "support/test_certs.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class curl_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        curl_ = find_in_path("curl").value_or("");
        // Not a skip: the e2e suite exists to run curl, and scripts/bootstrap installs it.
        ASSERT_FALSE(curl_.empty()) << "the curl binary was not found in PATH: install it (scripts/bootstrap "
                                       "does) to run the e2e tests";
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello from sluice"); });
        srv().route("GET", "/other", [](exchange& ex) { ex.response().text("other"); });
        srv().route("GET", "/version", [](exchange& ex) {
            const auto v = ex.request().version();
            ex.response().text(std::to_string(v.major) + "." + std::to_string(v.minor));
        });
        srv().route("POST", "/echo", [](exchange& ex) {
            const auto te = ex.request().header("Transfer-Encoding");
            ex.response().header("X-Request-Transfer-Encoding", te ? std::string(*te) : std::string("none"));
            ex.response().text(std::string(ex.request().body()));
        });
        srv().start();
    }

    std::string url(std::string_view path) const {
        return std::string(over_tls() ? "https" : "http") +
               "://127.0.0.1:" + std::to_string(server_->port()) + std::string(path);
    }

    /// Runs curl with -sS and a 5 s cap of its own, and expects it to succeed.
    process_result curl(std::vector<std::string> args) {
        std::vector<std::string> argv{curl_, "-sS", "--max-time", "5"};
        if (over_tls()) {
            // Verified against the run's own CA (not -k): the chain and the name are checked.
            argv.insert(argv.end(), {"--cacert", shared_test_certs().cert_path()});
        }
        argv.insert(argv.end(), args.begin(), args.end());
        process_result r = run_process(argv, milliseconds(10'000));
        EXPECT_TRUE(r.error.empty()) << r.error;
        EXPECT_FALSE(r.timed_out) << "curl did not finish";
        EXPECT_EQ(r.exit_code, 0) << "curl failed: " << r.err;
        return r;
    }

    std::string curl_;
};

TEST_P(curl_test, get) {
    auto r = curl({url("/")});
    EXPECT_EQ(r.out, "hello from sluice");
}

TEST_P(curl_test, post_with_a_body) {
    auto r = curl({"-d", "name=value&x=1", url("/echo")});
    EXPECT_EQ(r.out, "name=value&x=1");
}

TEST_P(curl_test, chunked_upload) {
    std::string body;
    for (int i = 0; i < 2000; ++i) {
        body += "line " + std::to_string(i) + "\n";
    }
    auto r =
        curl({"-D", "/dev/stderr", "-H", "Transfer-Encoding: chunked", "--data-binary", body, url("/echo")});
    EXPECT_TRUE(r.out == body) << "echoed " << r.out.size() << " of " << body.size() << " bytes";
    EXPECT_NE(r.err.find("X-Request-Transfer-Encoding: chunked"), std::string::npos)
        << "the server did not see a chunked request:\n"
        << r.err;
}

TEST_P(curl_test, http10) {
    auto r = curl({"--http1.0", "-D", "/dev/stderr", url("/version")});
    EXPECT_EQ(r.out, "1.0");
    EXPECT_EQ(r.err.rfind("HTTP/1.", 0), 0u) << r.err;
}

TEST_P(curl_test, head) {
    auto r = curl({"-I", url("/")});
    EXPECT_EQ(r.out.rfind("HTTP/1.1 200", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("Content-Length: 17"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("hello from sluice"), std::string::npos) << "HEAD must not carry a body";
}

TEST_P(curl_test, keepalive_reuses_one_connection_for_two_urls) {
    auto r = curl({"-w", "|%{num_connects}\n", url("/"), url("/other")});
    EXPECT_EQ(r.out, "hello from sluice|1\nother|0\n") << "the second URL should reuse the connection";
    EXPECT_EQ(srv().stats().connections_accepted, 1u);
}

TEST_P(curl_test, expect_100_continue) {
    const auto from = test_clock::now();
    auto r =
        curl({"-v", "-H", "Expect: 100-continue", "--expect100-timeout", "3", "-d", "payload", url("/echo")});
    EXPECT_EQ(r.out, "payload");
    EXPECT_NE(r.err.find("< HTTP/1.1 100 Continue"), std::string::npos) << "no interim response:\n" << r.err;
    // curl sends the body anyway once its expect timeout passes; an answered Expect is quicker.
    EXPECT_LT(test_clock::now() - from, milliseconds(2500));
}

SLUICE_BACKEND_SUITE(curl_test);

} // namespace
} // namespace sluice::test
