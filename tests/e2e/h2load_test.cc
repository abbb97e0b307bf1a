// End to end with an independent load generator: h2load (nghttp2-client) in HTTP/1.1 mode,
// pipelining, against every registered backend × dispatch mode. Every request must be
// answered: with threads to spare, the blocking backend's keep-alive pressure must not close
// connections and drop what clients pipelined (issue 6, defect 10: h2load --h1 -c 100 -m 10
// lost 6,813 of 200,000 requests on blocking with 200 threads).
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/process.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

struct h2load_counts {
    long total = -1;
    long succeeded = -1;
    long failed = -1;
};

// The number just before `label` in `line` ("... 2000 succeeded, ..."), or -1.
long count_before(const std::string& line, const std::string& label) {
    const auto at = line.find(" " + label);
    if (at == std::string::npos) {
        return -1;
    }
    auto start = at;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(line[start - 1])) != 0) {
        --start;
    }
    return start == at ? -1 : std::stol(line.substr(start, at - start));
}

h2load_counts parse_counts(const std::string& out) {
    // "requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout"
    // (no std::regex: GCC 12 warns inside it under -O2 sanitizer builds, and warnings are errors)
    h2load_counts c;
    const auto at = out.find("requests: ");
    if (at == std::string::npos) {
        return c;
    }
    const std::string line = out.substr(at, out.find('\n', at) - at);
    c.total = count_before(line, "total");
    c.succeeded = count_before(line, "succeeded");
    c.failed = count_before(line, "failed");
    return c;
}

class h2load_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        h2load_ = find_in_path("h2load").value_or("");
        // Not a skip: scripts/bootstrap installs nghttp2-client.
        ASSERT_FALSE(h2load_.empty())
            << "h2load was not found in PATH: install nghttp2-client (scripts/bootstrap)";
    }

    h2load_counts run(int requests, int connections, int pipelined) {
        // Over TLS h2load negotiates http/1.1 by ALPN (--h1) and does not verify the peer.
        const std::string url =
            std::string(over_tls() ? "https" : "http") + "://127.0.0.1:" + std::to_string(srv().port()) + "/";
        std::vector<std::string> argv{h2load_, "--h1",
                                      "-n",    std::to_string(requests),
                                      "-c",    std::to_string(connections),
                                      "-m",    std::to_string(pipelined),
                                      url};
        process_result r = run_process(argv, milliseconds(60'000));
        EXPECT_TRUE(r.error.empty()) << r.error;
        EXPECT_FALSE(r.timed_out) << "h2load did not finish";
        const h2load_counts c = parse_counts(r.out);
        EXPECT_EQ(c.total, requests) << r.out << r.err;
        return c;
    }

    std::string h2load_;
};

TEST_P(h2load_test, every_pipelined_request_is_answered) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    // 12 connections of the test server's 16 blocking threads: 75%, not above it: no pressure.
    const auto c = run(12000, 12, 10);
    EXPECT_EQ(c.failed, 0);
    EXPECT_EQ(c.succeeded, 12000);
}

SLUICE_BACKEND_SUITE(h2load_test);

} // namespace
} // namespace sluice::test
