// sluice-slow-backend as a real process: the delays, the list, the bandwidth-limited upload,
// the streamed bytes and the in-flight counters that the S1/S3 runners read.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/app_process.h"
#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

std::uint64_t fnv1a64(std::string_view data) {
    std::uint64_t h = 14695981039346656037ull;
    for (char c : data) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

std::string hex16(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::size_t count_of(std::string_view text, std::string_view what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) {
        ++n;
    }
    return n;
}

class slow_backend_test : public ::testing::Test {
protected:
    void start(std::vector<std::string> args = {}) {
        app_ = std::make_unique<app_process>(SLUICE_SLOW_BACKEND_BIN, args);
        ASSERT_TRUE(app_->started()) << app_->error();
    }

    // A clean exit on SIGTERM: no crash, no leak report (ASan), no hang.
    void TearDown() override {
        if (app_ && app_->started()) {
            EXPECT_EQ(app_->stop(), 0) << app_->log();
        }
    }

    std::optional<http_response> fetch(const std::string& request, milliseconds timeout = default_timeout) {
        test_client c(app_->port(), timeout);
        EXPECT_TRUE(c.send(request)) << c.error();
        auto r = c.read_response();
        EXPECT_TRUE(r) << c.error();
        return r;
    }

    std::unique_ptr<app_process> app_;
};

TEST_F(slow_backend_test, work_answers_after_the_delay_and_rejects_a_bad_one) {
    start();
    const auto from = test_clock::now();
    auto r = fetch(get_request("/work?ms=200"));
    ASSERT_TRUE(r);
    EXPECT_GE(test_clock::now() - from, milliseconds(195));
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, R"({"waited_ms":200})");
    for (const char* bad : {"/work?ms=abc", "/work?ms=-1", "/work?ms=600001", "/work?ms="}) {
        auto b = fetch(get_request(bad));
        ASSERT_TRUE(b);
        EXPECT_EQ(b->status, 400) << bad;
    }
}

TEST_F(slow_backend_test, many_waits_overlap_and_the_stats_count_them) {
    start();
    constexpr int n = 40;
    std::vector<std::unique_ptr<test_client>> clients;
    const auto from = test_clock::now();
    for (int i = 0; i < n; ++i) {
        clients.push_back(std::make_unique<test_client>(app_->port()));
        ASSERT_TRUE(clients.back()->send(get_request("/work?ms=600"))) << clients.back()->error();
    }
    auto during = fetch(get_request("/stats"));
    ASSERT_TRUE(during);
    EXPECT_NE(during->body.find("\"in_flight\":"), std::string::npos) << during->body;
    for (auto& c : clients) {
        auto r = c->read_response();
        ASSERT_TRUE(r) << c->error();
        EXPECT_EQ(r->status, 200);
    }
    EXPECT_LT(test_clock::now() - from, milliseconds(3000)) << "the waits did not overlap";
    auto s = fetch(get_request("/stats"));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->header("Content-Type"), "application/json");
    EXPECT_NE(s->body.find("\"max_in_flight\":" + std::to_string(n)), std::string::npos) << s->body;
    EXPECT_NE(s->body.find("\"served\":" + std::to_string(n)), std::string::npos) << s->body;
    EXPECT_NE(s->body.find("\"in_flight\":0"), std::string::npos) << s->body;
    auto reset = fetch(body_request("POST", "/stats/reset", ""));
    ASSERT_TRUE(reset);
    EXPECT_EQ(reset->body, R"({"in_flight":0,"max_in_flight":0,"served":0})");
}

TEST_F(slow_backend_test, files_lists_a_hundred_objects) {
    start();
    auto r = fetch(get_request("/files"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Content-Type"), "application/json");
    EXPECT_EQ(r->body.front(), '[');
    EXPECT_EQ(r->body.back(), ']');
    EXPECT_EQ(count_of(r->body, "\"name\":"), 100u);
}

TEST_F(slow_backend_test, uploads_share_the_link_bandwidth) {
    // 8 Mbit/s = 1,000,000 bytes/s: four 50,000-byte uploads at once carry 200,000 bytes,
    // ~200 ms for all of them on a fairly shared link.
    start({"--bandwidth-mbit", "8", "--set", "limits.max_body_bytes=200000"});
    std::vector<std::string> bodies;
    std::vector<std::unique_ptr<test_client>> clients;
    const auto from = test_clock::now();
    for (int i = 0; i < 4; ++i) {
        bodies.emplace_back(50'000, static_cast<char>('A' + i));
        clients.push_back(std::make_unique<test_client>(app_->port()));
        ASSERT_TRUE(clients.back()->send(body_request("POST", "/upload", bodies.back())));
    }
    for (int i = 0; i < 4; ++i) {
        auto r = clients[static_cast<std::size_t>(i)]->read_response();
        ASSERT_TRUE(r) << clients[static_cast<std::size_t>(i)]->error();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "{\"bytes\":50000,\"fnv1a64\":\"" +
                               hex16(fnv1a64(bodies[static_cast<std::size_t>(i)])) + "\"}");
    }
    const auto took = test_clock::now() - from;
    EXPECT_GE(took, milliseconds(180)) << "faster than the link";
    EXPECT_LT(took, milliseconds(2000));
}

TEST_F(slow_backend_test, unlimited_upload_answers_at_once_and_a_bad_bandwidth_is_a_startup_error) {
    start({"--bandwidth-mbit", "0"});
    auto r = fetch(body_request("POST", "/upload", "hello"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "{\"bytes\":5,\"fnv1a64\":\"" + hex16(fnv1a64("hello")) + "\"}");

    app_process bad(SLUICE_SLOW_BACKEND_BIN, {"--bandwidth-mbit", "fast"}, milliseconds(3000));
    EXPECT_FALSE(bad.started());
    EXPECT_NE(bad.log().find("bandwidth-mbit"), std::string::npos) << bad.log();
}

TEST_F(slow_backend_test, bytes_streams_exactly_n_bytes_of_the_pattern) {
    start();
    auto r = fetch(get_request("/bytes?n=1000003"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Content-Length"), "1000003");
    EXPECT_FALSE(r->chunked);
    ASSERT_EQ(r->body.size(), 1'000'003u);
    bool pattern = true;
    for (std::size_t i = 0; i < r->body.size() && pattern; i += 997) {
        pattern = r->body[i] == static_cast<char>('a' + (i % (64 * 1024)) % 26);
    }
    EXPECT_TRUE(pattern);
    auto empty = fetch(get_request("/bytes?n=0"));
    ASSERT_TRUE(empty);
    EXPECT_EQ(empty->status, 200);
    EXPECT_TRUE(empty->body.empty());
    auto bad = fetch(get_request("/bytes?n=x"));
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
}

TEST_F(slow_backend_test, bytes_to_a_reader_that_pauses_keeps_the_backend_memory_flat) {
    start();
    ASSERT_TRUE(fetch(get_request("/bytes?n=1000000"))); // warm the loop's pools
    const std::uint64_t before = app_->rss_bytes();
    ASSERT_GT(before, 0u);
    constexpr std::size_t total = std::size_t{128} << 20;
    test_client c(app_->port(), milliseconds(60'000));
    ASSERT_TRUE(c.send(get_request("/bytes?n=" + std::to_string(total)))) << c.error();
    // The reader pauses: a stream without backpressure would queue tens of MiB meanwhile.
    std::this_thread::sleep_for(milliseconds(1000));
    const std::uint64_t paused = app_->rss_bytes();
    RecordProperty("rss_before", std::to_string(before));
    RecordProperty("rss_paused", std::to_string(paused));
    // Read to the end of the body without parsing as it grows (128 MiB): the head says how long.
    std::uint64_t received = 0; // head included
    std::uint64_t expected = 0; // head + Content-Length, once the head is in
    std::string head;
    std::string buf(1 << 20, '\0');
    const auto deadline = test_clock::now() + milliseconds(60'000);
    while ((expected == 0 || received < expected) && test_clock::now() < deadline) {
        const ssize_t n = ::recv(c.fd(), buf.data(), buf.size(), 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd p{c.fd(), POLLIN, 0};
            (void)::poll(&p, 1, 100);
            continue;
        }
        if (n <= 0) {
            break;
        }
        received += static_cast<std::uint64_t>(n);
        if (expected == 0) {
            head.append(buf, 0, static_cast<std::size_t>(n));
            if (const std::size_t end = head.find("\r\n\r\n"); end != std::string::npos) {
                head.resize(end + 4);
                expected = end + 4 + total;
            }
        }
    }
    EXPECT_NE(head.find("\r\nContent-Length: " + std::to_string(total) + "\r\n"), std::string::npos) << head;
    EXPECT_EQ(received, expected) << "the stream did not end where its length says";
    EXPECT_LT(paused, before + (std::uint64_t{16} << 20))
        << "RSS grew from " << before << " to " << paused << " bytes while the reader paused";
}

// The same smoke run on every backend this kernel can run.
class slow_backend_backends_test : public ::testing::TestWithParam<std::string> {};

TEST_P(slow_backend_backends_test, work_and_files) {
    const std::string why = backend_unavailable_reason(GetParam());
    if (!why.empty()) {
        GTEST_SKIP() << why;
    }
    app_process app(SLUICE_SLOW_BACKEND_BIN, {"--backend", GetParam()});
    ASSERT_TRUE(app.started()) << app.error();
    for (const char* target : {"/work?ms=50", "/files", "/bytes?n=70000"}) {
        test_client c(app.port());
        ASSERT_TRUE(c.send(get_request(target)));
        auto r = c.read_response();
        ASSERT_TRUE(r) << target << ": " << c.error();
        EXPECT_EQ(r->status, 200) << target;
    }
}

std::vector<std::string> backend_names() {
    std::vector<std::string> out;
    for (const io::backend* b : io::registered_backends()) {
        out.emplace_back(b->name);
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(backends, slow_backend_backends_test, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

} // namespace
} // namespace sluice::test
