// sluice-load's closed loop against a real server: every loop is a sample, outcomes are
// classified, a duration ends the run. Runs on the client's own loop thread (TSan covers the
// hand-over of the samples to the main thread).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "options.h"
#include "request.h"
#include "runner.h"
#include "summary.h"
#include "support/test_certs.h"
#include "support/test_server.h"

namespace sluice::load {
namespace {

using sluice::test::test_server;

load_options plan(std::uint16_t port, std::string path, std::size_t users, std::uint64_t loops) {
    load_options o;
    o.users = users;
    o.loops = loops;
    o.host = "127.0.0.1:" + std::to_string(port);
    o.target = std::move(path);
    o.timeout = std::chrono::milliseconds(5000);
    return o;
}

bool all_ok(const run_result& r) {
    return std::all_of(r.samples.begin(), r.samples.end(),
                       [](const sample& x) { return x.error == error_kind::none; });
}

bool none_ok(const run_result& r) {
    return std::none_of(r.samples.begin(), r.samples.end(),
                        [](const sample& x) { return x.error == error_kind::none; });
}

std::uint16_t closed_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    ::close(fd); // bound, never listened, closed: a connect is refused
    return ntohs(a.sin_port);
}

TEST(LoadRunner, EveryLoopOfEveryUserIsASample) {
    test_server s("epoll", dispatch_mode::inline_io);
    s.route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    s.start();
    auto o = plan(s.port(), "/", 20, 5);
    auto req = build_request(o);
    auto r = run(o, req, nullptr);
    ASSERT_EQ(r.samples.size(), 100u);
    EXPECT_TRUE(std::all_of(r.samples.begin(), r.samples.end(),
                            [](const sample& x) { return x.error == error_kind::none; }));
    EXPECT_GT(r.bytes_received, 100u * 5); // at least the bodies
    EXPECT_EQ(r.bytes_sent, 100u * wire_size(req, o.host));
    EXPECT_EQ(s.stats().requests, 100u);
}

// https: every user's connection handshakes once and is kept; with --no-keep-alive every request
// handshakes anew. A certificate the client does not trust fails every request.
TEST(LoadRunner, HttpsWithTheServersCaKeepsOneConnectionPerUser) {
    test_server s("epoll", dispatch_mode::inline_io);
    s.config().tls.cert = sluice::test::shared_test_certs().cert_path();
    s.config().tls.key = sluice::test::shared_test_certs().key_path();
    s.route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    s.start();
    auto o = plan(s.port(), "/", 4, 5);
    o.tls = true;
    o.ca_file = sluice::test::shared_test_certs().cert_path();
    auto r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 20u);
    EXPECT_TRUE(all_ok(r));
    EXPECT_EQ(s.stats().connections_accepted, 4u);

    o.keep_alive = false;
    r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 20u);
    EXPECT_TRUE(all_ok(r));
    EXPECT_EQ(s.stats().connections_accepted, 4u + 20u);

    o.ca_file.clear(); // the system's CAs do not know the test's self-signed certificate
    o.keep_alive = true;
    r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 20u);
    EXPECT_TRUE(none_ok(r));
    EXPECT_EQ(s.stats().requests, 40u);

    o.insecure = true;
    r = run(o, build_request(o), nullptr);
    EXPECT_TRUE(all_ok(r));
}

TEST(LoadRunner, KeepAliveOffOpensAConnectionPerRequest) {
    test_server s("epoll", dispatch_mode::inline_io);
    s.route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    s.start();
    auto o = plan(s.port(), "/", 2, 3);
    o.keep_alive = false;
    auto r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 6u);
    EXPECT_EQ(s.stats().connections_accepted, 6u);
}

TEST(LoadRunner, StatusOutside2xxIsNon2xx) {
    test_server s("epoll", dispatch_mode::inline_io);
    s.route("GET", "/busy", [](exchange& ex) { ex.response().status(503).text("busy"); });
    s.start();
    auto o = plan(s.port(), "/busy", 3, 2);
    auto r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 6u);
    auto sum = summarize(r.samples, r.elapsed_s, 0, r.elapsed_s, r.bytes_received, r.bytes_sent);
    EXPECT_EQ(sum.errors[static_cast<std::size_t>(error_kind::non_2xx)], 6u);
    EXPECT_DOUBLE_EQ(sum.error_pct, 100.0);
}

TEST(LoadRunner, RefusedConnectIsAConnectError) {
    auto o = plan(closed_port(), "/", 2, 2);
    auto r = run(o, build_request(o), nullptr);
    ASSERT_EQ(r.samples.size(), 4u);
    for (const auto& x : r.samples) {
        EXPECT_EQ(x.error, error_kind::connect);
    }
}

TEST(LoadRunner, DurationEndsTheRun) {
    test_server s("epoll", dispatch_mode::inline_io);
    s.route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    s.start();
    auto o = plan(s.port(), "/", 4, 0);
    o.duration_s = 0.3;
    auto r = run(o, build_request(o), nullptr);
    EXPECT_DOUBLE_EQ(r.elapsed_s, 0.3);
    EXPECT_GT(r.samples.size(), 4u);
    for (const auto& x : r.samples) {
        EXPECT_LE(x.end_ms, 2000u); // nothing recorded long after the end (a bound for a busy host)
    }
}

} // namespace
} // namespace sluice::load
