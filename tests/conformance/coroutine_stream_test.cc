// A coroutine handler that streams its response with co_await sluice::drained(ex), on every
// backend × dispatch mode: each piece it writes goes out at the await (not at the end of the
// coroutine), a slow reader keeps the queued output bounded, and a client that leaves while it
// waits cancels the await.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <sluice/coro.h>
#include <sluice/drained.h>
#include <sluice/exchange.h>

#include "support/await_gate.h"
#include "support/backend_matrix.h"
#include "support/byte_pattern.h"
#include "support/paced_reader.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t piece_bytes = std::size_t{64} * 1024;

struct stream_seen {
    std::atomic<int> awaits{0};
    std::atomic<int> cancelled{0}; ///< drained() gave operation_canceled
    std::atomic<int> finished{0};
};

class coroutine_stream_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        const std::string piece = pattern_bytes(piece_bytes);
        // GET /stream?n=BYTES: 64 KiB pieces, each followed by co_await drained.
        srv().route("GET", "/stream", [piece, seen = seen_](exchange& ex) -> task<> {
            std::uint64_t left = std::stoull(std::string(ex.request().query_param("n").value_or("0")));
            ex.response().content_type("application/octet-stream");
            while (left > 0) {
                const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece_bytes));
                ex.response().write(std::string_view(piece).substr(0, n));
                left -= n;
                ++seen->awaits;
                if (const std::error_code ec = co_await drained(ex)) {
                    seen->cancelled += ec == std::errc::operation_canceled ? 1 : 0;
                    break;
                }
            }
            ++seen->finished;
        });
        // GET /gated: "first" written on the loop (after a timer), then drained, then a gate the
        // test opens only once it has read "first"; then "second".
        srv().route("GET", "/gated", [g = gate_](exchange& ex) -> task<> {
            if (co_await sleep_for(ex, milliseconds(1))) {
                co_return;
            }
            ex.response().write("first;");
            if (co_await drained(ex)) {
                co_return;
            }
            co_await g->wait(ex);
            ex.response().write("second;");
        });
    }

    /// GET /declared?write=N: declares 10 bytes, writes 5 and awaits the drain, then writes N
    /// more and awaits again; the second await's error is kept in seen_->cancelled.
    void add_declared_route() {
        srv().route("GET", "/declared", [seen = seen_](exchange& ex) -> task<> {
            const auto more = std::stoul(std::string(ex.request().query_param("write").value_or("0")));
            ex.response().content_length(10);
            if (co_await sleep_for(ex, milliseconds(1))) {
                co_return;
            }
            ex.response().write("12345");
            if (co_await drained(ex)) {
                co_return;
            }
            ex.response().write(std::string(more, 'x'));
            const std::error_code ec = co_await drained(ex);
            seen->cancelled += ec == std::errc::operation_canceled ? 1 : 0;
            ++seen->finished;
        });
    }

    std::shared_ptr<stream_seen> seen_ = std::make_shared<stream_seen>();
    std::shared_ptr<await_gate> gate_ = std::make_shared<await_gate>();
};

TEST_P(coroutine_stream_test, a_piece_goes_out_at_the_await_not_when_the_coroutine_ends) {
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/gated"))) << c.error();
    const bool first_arrived = c.read_until_contains("first;");
    gate_->open(); // whatever happened: the coroutine must end
    ASSERT_TRUE(first_arrived) << "the piece written before drained() was held back: " << c.error();
    EXPECT_EQ(c.buffered().find("second;"), std::string::npos) << "the gate was closed";
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->chunked);
    EXPECT_EQ(r->body, "first;second;");
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_stream_test, a_slow_reader_keeps_queued_output_bounded_and_gets_the_whole_body) {
    srv().start();
    constexpr std::size_t total = std::size_t{32} << 20;
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/stream?n=" + std::to_string(total)))) << c.error();
    bool eof = false;
    const std::string raw = read_paced(
        c, milliseconds(60'000),
        [](const std::string& got, std::size_t fresh) {
            return got.find("\r\n0\r\n\r\n", fresh) != std::string::npos;
        },
        eof);
    auto parsed = parse_response(raw, false);
    ASSERT_EQ(parsed.status, parse_status::complete) << raw.size() << " bytes: " << parsed.error;
    EXPECT_EQ(parsed.response.status, 200);
    ASSERT_EQ(parsed.response.body.size(), total);
    for (std::size_t off = 0; off < total; off += piece_bytes) {
        ASSERT_EQ(parsed.response.body[off], 'a') << "piece at " << off;
    }
    // One piece above the low-water mark, plus framing; without the await's flush the whole
    // body would wait for the coroutine's end, and without its wait it would pile up.
    const auto peak = srv().stats().output_queued_peak;
    RecordProperty("output_queued_peak", std::to_string(peak));
    EXPECT_LE(peak, 4 * piece_bytes) << "queued output peaked at " << peak << " bytes";
    EXPECT_EQ(seen_->awaits.load(), static_cast<int>(total / piece_bytes));
    EXPECT_EQ(seen_->cancelled.load(), 0);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_stream_test, a_client_leaving_while_the_coroutine_waits_cancels_the_await) {
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/stream?n=" + std::to_string(std::size_t{1} << 30)))) << c.error();
    // Nothing is read: the kernel buffers fill, the queue passes the mark, the await waits.
    ASSERT_TRUE(wait_until([&] { return seen_->awaits.load() >= 8; }));
    std::this_thread::sleep_for(milliseconds(200));
    const int awaits = seen_->awaits.load();
    EXPECT_LT(awaits, 1024) << "the coroutine did not wait for the reader";
    c.close_abortive();
    ASSERT_TRUE(wait_until([&] { return seen_->finished.load() == 1; }));
    EXPECT_EQ(seen_->cancelled.load(), 1);
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_LE(srv().stats().output_queued_peak, 4 * piece_bytes);
}

TEST_P(coroutine_stream_test, a_declared_length_written_exactly_keeps_the_connection) {
    add_declared_route();
    srv().start();
    test_client c(srv().port());
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(c.send(get_request("/declared?write=5"))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->header("Content-Length"), "10");
        EXPECT_FALSE(r->chunked);
        EXPECT_EQ(r->body, "12345xxxxx");
    }
    EXPECT_TRUE(wait_until([&] { return seen_->finished.load() == 2; }));
    EXPECT_EQ(seen_->cancelled.load(), 0);
}

TEST_P(coroutine_stream_test, writing_past_a_declared_length_at_an_await_fails_the_exchange_and_closes) {
    add_declared_route();
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/declared?write=6"))) << c.error();
    ASSERT_TRUE(c.wait_closed()) << c.error();
    const std::string& got = c.buffered();
    EXPECT_NE(got.find("Content-Length: 10\r\n"), std::string::npos) << got;
    EXPECT_EQ(got.find('x'), std::string::npos) << "bytes past the declared length went out: " << got;
    ASSERT_TRUE(wait_until([&] { return seen_->finished.load() == 1; }));
    EXPECT_EQ(seen_->cancelled.load(), 1)
        << "the await after the overflow did not report the failed exchange";
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

/// GET /cut: writes "first;" (it goes out when the handler first suspends), then sleeps until
/// the exchange ends, then writes again: that second piece must never be sent.
void add_cut_route(test_server& srv, const std::shared_ptr<stream_seen>& seen) {
    srv.route("GET", "/cut", [seen](exchange& ex) -> task<> {
        ex.response().write("first;");
        const std::error_code ec = co_await sleep_for(ex, milliseconds(10'000));
        seen->cancelled += ec == std::errc::operation_canceled ? 1 : 0;
        ex.response().write("written-after-the-cancellation;");
        ex.response().body().append("appended-after-the-cancellation;");
        ++seen->finished;
    });
}

TEST_P(coroutine_stream_test, after_a_timeout_a_cancelled_coroutine_writes_nothing_more_to_the_stream) {
    srv().config().async_timeout_ms = 150;
    add_cut_route(srv(), seen_);
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/cut"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("first;")) << c.error();
    ASSERT_TRUE(c.wait_closed()) << "a stream cut by the timeout ends with the connection: " << c.error();
    ASSERT_TRUE(wait_until([&] { return seen_->finished.load() == 1; }));
    EXPECT_EQ(seen_->cancelled.load(), 1);
    EXPECT_EQ(c.buffered().find("after-the-cancellation"), std::string::npos)
        << "a cancelled coroutine's write went out: " << printable(c.buffered());
    EXPECT_EQ(c.buffered().find("\r\n0\r\n\r\n"), std::string::npos) << "a cut stream has no last chunk";
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(coroutine_stream_test, after_a_stop_a_cancelled_coroutine_writes_nothing_more_to_the_stream) {
    add_cut_route(srv(), seen_);
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/cut"))) << c.error();
    ASSERT_TRUE(c.read_until_contains("first;")) << c.error();
    ASSERT_TRUE(srv().wait_suspended(1));
    srv().stop();
    EXPECT_EQ(seen_->finished.load(), 1) << "stop() returns after the coroutine ended";
    EXPECT_EQ(seen_->cancelled.load(), 1);
    ASSERT_TRUE(c.wait_closed()) << c.error();
    EXPECT_EQ(c.buffered().find("after-the-cancellation"), std::string::npos)
        << "a cancelled coroutine's write went out: " << printable(c.buffered());
}

SLUICE_BACKEND_SUITE(coroutine_stream_test);

} // namespace
} // namespace sluice::test
