// The gateway's async (complete) style on every backend × dispatch mode: an upstream response
// that is whole before anything went downstream is sent as it came, with its length — on
// epoll and uring by complete() from the client's callback, without the handler running a
// second time (docs/gateway.md); on blocking, where the call runs on the client's own loop,
// the handler may run again. A response whose body lags behind its head still gets
// its head downstream at once, then the body.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "gateway.h"
#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

class gateway_complete_test : public backend_test {
protected:
    /// The gateway's routes, the async style's /work counting how often its handler runs.
    void start_gateway(const std::string& address) {
        gw_ = std::make_unique<::gateway::gateway>(upstream({address}), client_options{});
        for (auto& r : ::gateway::routes(*gw_)) {
            if (r.path == "/api/async/work") {
                r.h = [inner = std::move(r.h), this](exchange& ex) {
                    runs_.fetch_add(1);
                    inner(ex);
                };
            }
            srv().route(r.method, r.path, std::move(r.h));
        }
        srv().start();
    }

    void TearDown() override {
        backend_test::TearDown();
        gw_.reset();
    }

    std::atomic<int> runs_{0};
    std::unique_ptr<::gateway::gateway> gw_;
};

TEST_P(gateway_complete_test, a_response_whole_at_its_head_is_completed_from_the_callback_in_one_run) {
    // One write of a few dozen bytes on loopback: the gateway reads head, body and end at once.
    fake_upstream up([](upstream_conn& c) {
        while (c.read_request()) {
            if (!c.write(upstream_response(200, "hello", "X-Up: 1\r\n"))) {
                return;
            }
        }
    });
    start_gateway(up.address());
    test_client c(srv().port());
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(c.send(get_request("/api/async/work?ms=0"))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "hello");
        EXPECT_EQ(r->header("Content-Length"), "5") << "sent as it came, not streamed";
        EXPECT_EQ(r->header("X-Up"), "1");
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
    // On blocking the client's loop races the exchange's: the handler may run again for the
    // head and for the end (the response is the same, as checked above).
    if (!connection_per_thread()) {
        EXPECT_EQ(runs_.load(), 3) << "the handler ran again for responses that were whole before it";
    }
}

TEST_P(gateway_complete_test, a_head_whose_body_lags_goes_downstream_at_once_then_the_body) {
    std::atomic<bool> head_seen{false};
    fake_upstream up([&](upstream_conn& c) {
        if (!c.read_request() || !c.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")) {
            return;
        }
        // The body comes only once the downstream client has the head (or after 5 s).
        (void)wait_until([&] { return head_seen.load(); }, 5s);
        (void)c.write("hello");
        (void)c.wait_closed(10s);
    });
    start_gateway(up.address());
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/api/async/work"))) << c.error();
    c.set_timeout(4s); // under the upstream's 5 s: the head must come before the body
    ASSERT_TRUE(c.read_until_contains("\r\n\r\n"))
        << "no head downstream before the body came: " << c.error();
    EXPECT_EQ(c.buffered().rfind("HTTP/1.1 200", 0), 0u) << c.buffered();
    head_seen = true;
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(r->header("Content-Length"), "5");
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

SLUICE_BACKEND_SUITE(gateway_complete_test);

} // namespace
} // namespace sluice::test
