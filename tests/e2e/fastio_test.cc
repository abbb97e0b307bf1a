// sluice-fastio as a real process: /fast at once, /io after a 20 ms loop timer, /io-blocking
// after a 20 ms sleep of the handler's thread (which the watchdog reports on an inline loop).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/app_process.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class fastio_test : public ::testing::Test {
protected:
    std::optional<http_response> fetch(std::uint16_t port, const std::string& target) {
        test_client c(port);
        EXPECT_TRUE(c.send(get_request(target))) << c.error();
        auto r = c.read_response();
        EXPECT_TRUE(r) << c.error();
        return r;
    }
};

TEST_F(fastio_test, the_three_routes_answer_the_same_json) {
    app_process app(SLUICE_FASTIO_BIN, {});
    ASSERT_TRUE(app.started()) << app.error();
    auto fast = fetch(app.port(), "/fast");
    ASSERT_TRUE(fast);
    EXPECT_EQ(fast->status, 200);
    EXPECT_EQ(fast->header("Content-Type"), "application/json");
    EXPECT_GE(fast->body.size(), 50u);
    EXPECT_LE(fast->body.size(), 70u);
    for (const char* target : {"/io", "/io-blocking"}) {
        const auto from = test_clock::now();
        auto r = fetch(app.port(), target);
        ASSERT_TRUE(r);
        EXPECT_GE(test_clock::now() - from, milliseconds(19)) << target;
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, fast->body) << target;
    }
    EXPECT_EQ(app.stop(), 0) << "a clean exit on SIGTERM:\n" << app.log();
}

TEST_F(fastio_test, io_waits_overlap_without_threads) {
    // One I/O thread, inline: 50 concurrent /io requests still finish in about one 20 ms wait.
    app_process app(SLUICE_FASTIO_BIN, {"--backend", "epoll", "--io-threads", "1"});
    ASSERT_TRUE(app.started()) << app.error();
    std::vector<std::unique_ptr<test_client>> clients;
    for (int i = 0; i < 50; ++i) {
        clients.push_back(std::make_unique<test_client>(app.port()));
    }
    const auto from = test_clock::now();
    for (auto& c : clients) {
        ASSERT_TRUE(c->send(get_request("/io")));
    }
    for (auto& c : clients) {
        auto r = c->read_response();
        ASSERT_TRUE(r) << c->error();
        EXPECT_EQ(r->status, 200);
    }
    EXPECT_LT(test_clock::now() - from, milliseconds(50 * 20)) << "the waits ran one after another";
}

TEST_F(fastio_test, a_blocking_handler_on_an_inline_loop_trips_the_watchdog) {
    app_process app(SLUICE_FASTIO_BIN,
                    {"--backend", "epoll", "--dispatch", "inline", "--set", "watchdog_ms=10"});
    ASSERT_TRUE(app.started()) << app.error();
    EXPECT_TRUE(wait_until(
        [&] {
            auto r = fetch(app.port(), "/io-blocking");
            return r && app.log().find("WATCHDOG") != std::string::npos;
        },
        milliseconds(5000)))
        << app.log();
}

} // namespace
} // namespace sluice::test
