// limits.write_timeout_ms bounds the time to send a response, not each send call: a client
// that keeps reading a few bytes now and then (slow read, "slowhttptest -X") is cut off
// within the timeout (plus limits.min_send_rate's allowance) on every backend × dispatch
// mode, and a server stop does not wait for it. And a head timeout that fires with responses
// still queued sends them, then the documented 408.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class slow_reader_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        srv().route("GET", "/huge", [](exchange& ex) { ex.response().text(std::string(32u << 20, 'h')); });
    }

    struct reading {
        milliseconds took{0};        ///< from the start of reading until it stopped
        milliseconds since_first{0}; ///< from the first byte received until it stopped
        std::size_t bytes = 0;       ///< received in all
        test_clock::time_point end;  ///< when it stopped
    };

    /// Reads up to 32 KiB every 20 ms (about 1.6 MB/s: the 32 MiB response lasts ~20 s) until
    /// `until` says stop or `bound` passes. The reads keep freeing enough of the server's send
    /// buffer for a send to make progress now and then, so a write deadline re-armed on every
    /// partial send never fires.
    template <class Pred>
    reading read_slowly(test_client& c, Pred until, milliseconds bound) {
        const auto start = test_clock::now();
        auto first = start;
        reading r;
        std::string buf(32 * 1024, '\0');
        while (!until() && test_clock::now() - start < bound) {
            const ssize_t n = ::recv(c.fd(), buf.data(), buf.size(), MSG_DONTWAIT);
            if (n > 0) {
                if (r.bytes == 0) {
                    first = test_clock::now();
                }
                r.bytes += static_cast<std::size_t>(n);
            }
            std::this_thread::sleep_for(milliseconds(20));
        }
        r.end = test_clock::now();
        r.took = std::chrono::duration_cast<milliseconds>(r.end - start);
        r.since_first = std::chrono::duration_cast<milliseconds>(r.end - first);
        return r;
    }
};

TEST_P(slow_reader_test, a_client_reading_slowly_is_cut_off_after_the_write_timeout) {
    // At ~1.6 MB/s a send makes progress every few hundred ms, well within the timeout each time.
    srv().config().limits.write_timeout_ms = 2000;
    srv().config().limits.min_send_rate = 0; // no allowance per byte: the timeout is the cap
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/huge"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    const auto r = read_slowly(
        c, [&] { return srv().stats().connections_open == 0; }, milliseconds(12000));
    EXPECT_EQ(srv().stats().connections_open, 0u)
        << "a slow reader held the connection for " << r.since_first.count()
        << " ms with write_timeout_ms = 2000";
    EXPECT_LT(r.bytes, std::size_t{32} << 20) << "cut off, not finished";
    // Timed from the first byte, as the cap is (see the next case). The whole response takes
    // the reader ~20 s; 5 s of slack is for a loaded machine (a sanitizer build beside other
    // work failed 3 of 18 runs with 2 s).
    EXPECT_LT(r.since_first, milliseconds(2000 + 5000));
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(slow_reader_test, min_send_rate_extends_the_budget_by_the_size_of_the_response) {
    // 32 MiB at 16 MiB/s: 2 s of allowance on top of the 2 s; the slow reader (~1.6 MB/s) is
    // cut off after that, not before. The no-progress bound is 2 s too, not 1 s: a send makes
    // progress only when the kernel frees a good part of a loopback send buffer (autotuned to
    // MiBs), which a reader slowed by a loaded machine can take longer than 1 s to take in (and
    // over TLS, until 2026-12-06, progress was reported once per 256 KiB, tls_driver.h).
    srv().config().limits.write_timeout_ms = 2000;
    srv().config().limits.min_send_rate = 16u << 20;
    srv().start();
    test_client c(srv().port());
    const auto asked = test_clock::now();
    ASSERT_TRUE(c.send(get_request("/huge"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    const auto r = read_slowly(
        c, [&] { return srv().stats().connections_open == 0; }, milliseconds(16000));
    EXPECT_EQ(srv().stats().connections_open, 0u);
    EXPECT_LT(r.bytes, std::size_t{32} << 20) << "cut off, not finished";
    // The budget counts from when the response was queued, after the request was sent: the cut
    // can never come sooner than 4 s after it (2 s without the allowance). Timing it from the
    // first byte instead failed once in CI (1.69 s with a 1 s + 2 s budget, uring/pool/tls,
    // release beside a sanitizer build).
    const auto since_asked = std::chrono::duration_cast<milliseconds>(r.end - asked);
    EXPECT_GE(since_asked, milliseconds(4000))
        << r.bytes << " bytes read; first byte after " << (since_asked - r.since_first).count() << " ms";
    // ~4.1 s in release, more under TSan on the inline rows: 7 s of slack, still under the
    // ~20 s the reader needs for the whole response.
    EXPECT_LT(r.since_first, milliseconds(4000 + 7000));
}

TEST_P(slow_reader_test, server_stop_does_not_wait_for_a_slow_reader) {
    srv().config().limits.write_timeout_ms = 60'000;
    srv().config().shutdown_timeout_ms = 100;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/huge"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().requests == 1; }));
    read_slowly(
        c, [] { return false; }, milliseconds(300));
    std::atomic<bool> stopped{false};
    bg_.run([&] {
        srv().stop();
        stopped = true;
    });
    const auto took = read_slowly(
                          c, [&] { return stopped.load(); }, milliseconds(10000))
                          .took;
    EXPECT_TRUE(stopped.load()) << "stop still waits for the slow reader after " << took.count() << " ms";
    // The drain (100 ms), then a second for what is left, then closing: 1.1 s on epoll and
    // uring, ~1.5 s on blocking (its sends wake every 250 ms; then its threads are joined) in
    // release. Under TSan beside another shard blocking/inline took 4.7 s once (2.2-2.8 s
    // quiet), so 5 s of slack: the reader alone would need ~20 s, the write timeout 60 s.
    EXPECT_LT(took, milliseconds(100 + 1000 + 5000));
    bg_.join();
}

TEST_P(slow_reader_test, head_timeout_with_a_response_still_queued_sends_it_then_408) {
    // The head timeout must not run out before the server read the first request (under TSan
    // on a loaded machine that took 20 ms): 100 ms, and a handler 3 times as long.
    srv().config().limits.header_timeout_ms = 100;
    srv().route("GET", "/slow", [](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(300)); // longer than the head timeout
        ex.response().text("slow");
    });
    srv().start();
    test_client c(srv().port());
    // The first request whole, the second's head begun: its head deadline runs out while the
    // first response may still be queued.
    ASSERT_TRUE(c.send(get_request("/slow") + "GET /slow HTTP/1.1\r\nHo")) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "slow");
    auto t = c.read_response();
    ASSERT_TRUE(t) << c.error();
    EXPECT_EQ(t->status, 408);
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

SLUICE_BACKEND_SUITE(slow_reader_test);

} // namespace
} // namespace sluice::test
