// A handler streaming a large body to a slow reader keeps the server's queued output for that
// connection bounded, on every backend × dispatch mode: it writes a chunk, suspends, and asks
// async_context::on_drained() to resume it once the connection's output fell to the low-water
// mark. The body arrives whole; a client that leaves while the stream waits ends the exchange
// with on_error, and the drain callback never runs after the exchange's terminal transition.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/byte_pattern.h"
#include "support/paced_reader.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t chunk_bytes = std::size_t{64} * 1024;

struct stream_probe {
    std::atomic<int> drained_after_done{0}; // drain callbacks that found the exchange ended
    std::atomic<int> drain_calls{0};
};

class stream_backpressure_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        // GET /stream?n=BYTES: 64 KiB per dispatch (a multiple of 26 would keep the pattern in
        // phase; 65536 % 26 != 0, so the reader checks chunk by chunk instead).
        srv().route("GET", "/stream", [this](exchange& ex) {
            std::uint64_t left = 0;
            if (ex.is_initial()) {
                left = std::stoull(std::string(ex.request().query_param("n").value_or("0")));
                ex.response().content_type("application/octet-stream");
            } else {
                left = ex.attribute<std::uint64_t>("left").value_or(0);
            }
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk_bytes));
            ex.response().write(std::string_view(pattern_).substr(0, n));
            left -= n;
            if (left == 0) {
                return;
            }
            ex.set_attribute("left", left);
            auto ctx = ex.start_async(milliseconds(timeout_ms_));
            if (ex.is_initial()) {
                events_.attach(ctx);
            }
            auto probe = probe_;
            ctx.on_drained([ctx, probe]() mutable {
                probe->drain_calls.fetch_add(1);
                if (ctx.is_done()) {
                    probe->drained_after_done.fetch_add(1);
                }
                ctx.resume();
            });
        });
    }

    /// Reads the chunked response to /stream slowly (support/paced_reader.h). Returns the
    /// de-chunked body.
    std::string read_slowly(test_client& c, std::size_t expected) {
        bool eof = false;
        const std::string raw = read_paced(
            c, milliseconds(60'000),
            [](const std::string& got, std::size_t fresh) {
                return got.find("\r\n0\r\n\r\n", fresh) != std::string::npos;
            },
            eof);
        auto parsed = parse_response(raw, false);
        if (parsed.status != parse_status::complete) {
            ADD_FAILURE() << "no whole response in " << raw.size() << " bytes: " << parsed.error;
            return {};
        }
        EXPECT_EQ(parsed.response.status, 200);
        EXPECT_TRUE(parsed.response.chunked);
        EXPECT_EQ(parsed.response.body.size(), expected);
        return std::move(parsed.response.body);
    }

    std::string pattern_ = pattern_bytes(chunk_bytes);
    std::shared_ptr<stream_probe> probe_ = std::make_shared<stream_probe>();
    std::uint32_t timeout_ms_ = 30'000;
};

TEST_P(stream_backpressure_test, a_slow_reader_keeps_queued_output_bounded_and_gets_the_whole_body) {
    srv().start();
    constexpr std::size_t total = std::size_t{64} << 20;
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/stream?n=" + std::to_string(total)))) << c.error();
    const std::string body = read_slowly(c, total);
    ASSERT_EQ(body.size(), total);
    for (std::size_t off = 0; off < total; off += chunk_bytes) {
        const auto n = std::min(chunk_bytes, total - off);
        ASSERT_EQ(std::string_view(body).substr(off, n), std::string_view(pattern_).substr(0, n))
            << "chunk at " << off;
    }
    // One chunk on top of the low-water mark, plus framing; without backpressure the body
    // piles up (tens of MiB) while the reader pauses.
    const auto peak = srv().stats().output_queued_peak;
    RecordProperty("output_queued_peak", std::to_string(peak));
    EXPECT_LE(peak, 4 * chunk_bytes) << "queued output peaked at " << peak << " bytes";
    EXPECT_GT(probe_->drain_calls.load(), 0);
    EXPECT_EQ(probe_->drained_after_done.load(), 0);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(stream_backpressure_test, a_client_leaving_while_the_stream_waits_for_drain_ends_it_with_on_error) {
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/stream?n=" + std::to_string(std::size_t{1} << 30)))) << c.error();
    // Nothing is read: the kernel buffers fill, the queue reaches the mark, the stream waits.
    ASSERT_TRUE(srv().wait_suspended(1));
    std::this_thread::sleep_for(milliseconds(200));
    c.close_abortive();
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "error,complete");
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_EQ(probe_->drained_after_done.load(), 0);
    EXPECT_LE(srv().stats().output_queued_peak, 4 * chunk_bytes);
}

TEST_P(stream_backpressure_test, the_async_timeout_still_ends_a_stream_that_waits_for_drain) {
    timeout_ms_ = 300;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/stream?n=" + std::to_string(std::size_t{1} << 30)))) << c.error();
    ASSERT_TRUE(events_.wait_for_count(2)) << events_.sequence();
    EXPECT_EQ(events_.sequence(), "timeout,complete");
    EXPECT_TRUE(c.wait_closed()) << c.error(); // the head is out: the stream is cut, not ended
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_EQ(probe_->drained_after_done.load(), 0);
}

SLUICE_BACKEND_SUITE(stream_backpressure_test);

} // namespace
} // namespace sluice::test
