// The gateway's streamed relay (apps/gateway/relay.h) on every backend × dispatch mode: a large
// upstream response goes through the gateway's own routes to a downstream reader that pauses,
// and the server's queued output stays bounded (server_stats::output_queued_peak, the real
// counter) while the bytes arrive intact — with Content-Length, chunked and close-delimited
// upstream framing, in the async and the resume style. A reader that leaves mid-body cancels
// the upstream call: its connection is closed, nothing stays open. The co style (a coroutine
// over client::stream) is held to the same bounds as the callback styles.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <sluice/client.h>

#include "gateway.h"
#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/open_fds.h"
#include "support/paced_reader.h"
#include "support/test_certs.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

enum class framing { content_length, chunked, close_delimited };

constexpr std::size_t piece_bytes = std::size_t{64} * 1024;
constexpr std::size_t queue_bound = std::size_t{1} << 20;

// Byte i of the body is 'a' + i % 26, so the reader checks every byte, wherever it was cut.
std::string pattern_from(std::size_t offset, std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = static_cast<char>('a' + (offset + i) % 26);
    }
    return s;
}

char hex_digit(std::size_t v) {
    return "0123456789abcdef"[v & 15];
}

std::string chunk_size_line(std::size_t n) {
    std::string hex;
    do {
        hex.insert(hex.begin(), hex_digit(n));
        n >>= 4;
    } while (n != 0);
    return hex + "\r\n";
}

/// Serves one GET with `total` bytes in the given framing; blocking sends, so the upstream is
/// held by TCP flow control whenever the gateway stops reading.
void serve_bytes(upstream_conn& c, std::size_t total, framing f, std::atomic<bool>& write_failed) {
    if (!c.read_request()) {
        return;
    }
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n";
    if (f == framing::content_length) {
        head += "Content-Length: " + std::to_string(total) + "\r\n";
    } else if (f == framing::chunked) {
        head += "Transfer-Encoding: chunked\r\n";
    } else {
        head += "Connection: close\r\n";
    }
    head += "\r\n";
    if (!c.write(head)) {
        write_failed = true;
        return;
    }
    for (std::size_t off = 0; off < total; off += piece_bytes) {
        const std::size_t n = std::min(piece_bytes, total - off);
        std::string piece = pattern_from(off, n);
        if (f == framing::chunked) {
            piece = chunk_size_line(n) + piece + "\r\n";
        }
        if (!c.write(piece)) {
            write_failed = true;
            return;
        }
    }
    if (f == framing::chunked && !c.write("0\r\n\r\n")) {
        write_failed = true;
        return;
    }
    if (f != framing::close_delimited) {
        (void)c.wait_closed(30s); // a pooled connection: the client closes it at its end
    }
}

class gateway_stream_test : public backend_test {
protected:
    void start_gateway(const std::string& address, client_options o = {}) {
        o.max_response_bytes = std::size_t{1} << 20; // a buffering path would fail: the body is 64x that
        gw_ = std::make_unique<::gateway::gateway>(upstream({address}), o);
        for (auto& r : ::gateway::routes(*gw_)) {
            srv().route(r.method, r.path, std::move(r.h));
        }
        srv().start();
    }

    /// Reads the response slowly (support/paced_reader.h).
    http_response read_slowly(test_client& c, std::size_t total) {
        bool eof = false;
        // Parsed only once the body can be whole: re-parsing a growing 64 MiB buffer after
        // every read is quadratic (minutes under TSan).
        const std::string raw = read_paced(
            c, 120s,
            [total](const std::string& got, std::size_t) {
                return got.size() >= total && parse_response(got, false).status == parse_status::complete;
            },
            eof);
        auto parsed = parse_response(raw, eof);
        if (parsed.status != parse_status::complete) {
            ADD_FAILURE() << "no whole response in " << raw.size() << " bytes (eof " << eof
                          << "): " << parsed.error;
            return {};
        }
        return parsed.response;
    }

    void relay_through(const char* style, framing f, std::size_t total) {
        std::atomic<bool> write_failed{false};
        fake_upstream up([&](upstream_conn& c) { serve_bytes(c, total, f, write_failed); });
        start_gateway(up.address());
        test_client c(srv().port(), 120s);
        ASSERT_TRUE(c.send(get_request(std::string("/api/") + style + "/bytes"))) << c.error();
        const http_response r = read_slowly(c, total);
        ASSERT_EQ(r.status, 200);
        ASSERT_EQ(r.body.size(), total);
        if (f == framing::content_length) {
            // The upstream's length goes on downstream (response::content_length): the client
            // sees the same framing as if it had asked the upstream itself.
            EXPECT_EQ(r.header("Content-Length"), std::to_string(total));
            EXPECT_FALSE(r.header("Transfer-Encoding"));
            EXPECT_FALSE(r.chunked);
        } else {
            EXPECT_TRUE(r.chunked) << "no length known up front: chunked downstream";
            EXPECT_FALSE(r.header("Content-Length"));
        }
        for (std::size_t off = 0; off < total; off += piece_bytes) {
            const std::size_t n = std::min(piece_bytes, total - off);
            ASSERT_EQ(std::string_view(r.body).substr(off, n), pattern_from(off, n)) << "bytes at " << off;
        }
        EXPECT_FALSE(write_failed.load());
        // The low-water mark, plus what the relay holds before it pauses the upstream (64 KiB),
        // plus what the driver had already received when the pause came (one batch of
        // completions: with io_uring's multishot recv on the client's own loop, which the
        // blocking rows use, a few hundred KiB), plus framing. Without streaming the whole
        // body queues here (64 or 16 MiB).
        const auto peak = srv().stats().output_queued_peak;
        RecordProperty("output_queued_peak", std::to_string(peak));
        EXPECT_LE(peak, queue_bound) << "queued output peaked at " << peak << " bytes";
        EXPECT_TRUE(srv().wait_exchanges_freed());
        // A clean end gives the connection back to the pool; a close-delimited one closes it.
        const std::size_t open_after = f == framing::close_delimited ? 0u : 1u;
        EXPECT_TRUE(wait_until([&] { return gw_->api.stats().open == open_after; }))
            << gw_->api.stats().open << " upstream connections open";
        EXPECT_EQ(gw_->api.stats().completed, 1u);
    }

    void TearDown() override {
        backend_test::TearDown();
        gw_.reset();
    }

    std::unique_ptr<::gateway::gateway> gw_;
};

TEST_P(gateway_stream_test, a_64_mib_content_length_body_reaches_a_pausing_reader_with_bounded_queue) {
    relay_through("async", framing::content_length, std::size_t{64} << 20);
}

TEST_P(gateway_stream_test, a_content_length_body_keeps_its_length_in_the_resume_style) {
    relay_through("resume", framing::content_length, std::size_t{16} << 20);
}

TEST_P(gateway_stream_test, an_upstream_body_cut_mid_way_is_cut_downstream_before_its_length) {
    constexpr std::size_t total = std::size_t{8} << 20;
    constexpr std::size_t sent_before_cut = std::size_t{1} << 20;
    std::atomic<bool> reader_has_bytes{false};
    fake_upstream up([&](upstream_conn& c) {
        if (!c.read_request()) {
            return;
        }
        if (!c.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n") ||
            !c.write(pattern_from(0, sent_before_cut))) {
            return;
        }
        // Cut only once the downstream head is out: before it, the gateway answers 502.
        (void)wait_until([&] { return reader_has_bytes.load(); }, 10s);
    }); // returning closes the connection mid-body
    start_gateway(up.address());
    for (const char* style : {"async", "resume", "co"}) {
        reader_has_bytes = false;
        test_client c(srv().port(), 10s);
        ASSERT_TRUE(c.send(get_request(std::string("/api/") + style + "/bytes"))) << c.error();
        ASSERT_TRUE(c.read_until_contains("abcdefghij")) << c.error();
        reader_has_bytes = true;
        ASSERT_TRUE(c.wait_closed()) << style << ": " << c.error();
        const std::string& raw = c.buffered();
        const std::size_t head_end = raw.find("\r\n\r\n");
        ASSERT_NE(head_end, std::string::npos);
        const std::string_view head = std::string_view(raw).substr(0, head_end);
        EXPECT_NE(head.find("Content-Length: " + std::to_string(total)), std::string_view::npos) << style;
        EXPECT_EQ(head.find("Transfer-Encoding"), std::string_view::npos) << style;
        // Everything that came before the cut: the relay writes what it holds before it cuts
        // (the_piece_that_came_with_the_cut_still_goes_downstream), and the client reads what
        // is still in the socket behind a hang-up heard while paused (loop/paused_hang_up.h:
        // on the blocking rows, whose client runs on io_uring, it ended up to 30 KiB short).
        const std::string_view body = std::string_view(raw).substr(head_end + 4);
        EXPECT_EQ(body.size(), sent_before_cut) << style;
        EXPECT_EQ(body, pattern_from(0, body.size())) << style;
        EXPECT_EQ(parse_response(raw, true).status, parse_status::malformed) << style << ": looks whole";
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

// The last piece before a cut and the cut itself reach the relay together (one read, or both
// before the handler's next dispatch: the usual order on the blocking rows): the piece still
// goes out before the stream is cut (found by review: the async and resume styles dropped
// it, so the client saw the head and then the close). The co style sends the head with the
// first piece, so it has no such moment: the two callback styles send the head at once.
TEST_P(gateway_stream_test, the_piece_that_came_with_the_cut_still_goes_downstream) {
    std::atomic<bool> head_seen{false};
    fake_upstream up([&](upstream_conn& c) {
        if (!c.read_request() || !c.write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")) {
            return;
        }
        (void)wait_until([&] { return head_seen.load(); }, 10s);
        (void)c.write("abc");
    }); // returning closes the connection right behind the piece
    start_gateway(up.address());
    for (const char* style : {"async", "resume"}) {
        for (int round = 0; round < 5; ++round) {
            head_seen = false;
            test_client c(srv().port(), 10s);
            ASSERT_TRUE(c.send(get_request(std::string("/api/") + style + "/bytes"))) << c.error();
            ASSERT_TRUE(c.read_until_contains("\r\n\r\n")) << style << ": " << c.error();
            head_seen = true;
            ASSERT_TRUE(c.wait_closed()) << style << ": " << c.error();
            const std::string& raw = c.buffered();
            EXPECT_EQ(raw.substr(raw.find("\r\n\r\n") + 4), "abc") << style << " round " << round;
        }
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(gateway_stream_test, a_content_length_body_streams_in_the_co_style) {
    relay_through("co", framing::content_length, std::size_t{16} << 20);
}

TEST_P(gateway_stream_test, a_chunked_body_streams_in_the_co_style) {
    relay_through("co", framing::chunked, std::size_t{16} << 20);
}

TEST_P(gateway_stream_test, a_chunked_body_streams_in_the_resume_style) {
    relay_through("resume", framing::chunked, std::size_t{16} << 20);
}

TEST_P(gateway_stream_test, a_close_delimited_body_streams_and_its_connection_closes) {
    relay_through("async", framing::close_delimited, std::size_t{16} << 20);
}

TEST_P(gateway_stream_test, a_reader_leaving_mid_body_cancels_and_closes_the_upstream_connection) {
    std::atomic<bool> write_failed{false};
    std::atomic<int> scripts_done{0};
    fake_upstream up([&](upstream_conn& c) {
        serve_bytes(c, std::size_t{1} << 30, framing::content_length, write_failed);
        ++scripts_done;
    });
    start_gateway(up.address());
    std::size_t fds_baseline = 0;
    int round = 0;
    for (const char* style : {"async", "resume", "co"}) {
        test_client c(srv().port(), 10s);
        ASSERT_TRUE(c.send(get_request(std::string("/api/") + style + "/bytes"))) << c.error();
        // Some of the body arrives; then the reader stops reading and leaves.
        ASSERT_TRUE(c.read_until_contains("abcdefghij")) << c.error();
        ASSERT_TRUE(wait_until([&] { return srv().stats().output_queued_peak > 0; }));
        c.close_abortive();
        // The upstream sees its connection closed mid-body (its send fails).
        ++round;
        EXPECT_TRUE(wait_until([&] { return scripts_done.load() == round; }, 10s))
            << style << ": " << scripts_done.load() << " upstream scripts done";
        EXPECT_TRUE(wait_until([&] { return gw_->api.stats().open == 0; }))
            << style << ": " << gw_->api.stats().open << " upstream connections open";
        EXPECT_TRUE(srv().wait_exchanges_freed()) << style;
        // Descriptors after the first round (the blocking rows' client loop starts on the first
        // call): every later round gives back what it took.
        if (round == 1) {
            fds_baseline = open_fds();
        } else {
            EXPECT_TRUE(wait_until([&] { return open_fds() <= fds_baseline; }))
                << style << ": " << open_fds() << " descriptors open, " << fds_baseline << " before";
        }
    }
    EXPECT_TRUE(write_failed.load());
    EXPECT_EQ(gw_->api.stats().completed, 0u);
    EXPECT_LE(srv().stats().output_queued_peak, queue_bound);
}

SLUICE_BACKEND_SUITE(gateway_stream_test);

// An https upstream's close-delimited body (tls/tls_driver.h): whole when close_notify ends it,
// cut downstream when a bare FIN does, since a FIN carries no MAC and may have cut it (RFC 8446
// §6.1). The body fits in the socket buffers and the reader waits a second first: the relay has
// paused the upstream when the FIN arrives, and what came before it (close_notify included) is
// still unread, so the end is told apart only once those bytes are read.
class gateway_tls_stream_test : public gateway_stream_test {
protected:
    static constexpr std::size_t total = std::size_t{2} << 20;

    std::string relay_close_delimited(bool close_notify, bool& eof) {
        fake_upstream up([close_notify](upstream_conn& c) {
            upstream_tls t(c, 30s);
            if (!t.read_head() || !t.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")) {
                return;
            }
            for (std::size_t off = 0; off < total; off += piece_bytes) {
                if (!t.write(pattern_from(off, std::min(piece_bytes, total - off)))) {
                    return;
                }
            }
            close_notify ? t.close_notify() : t.bare_fin();
            (void)c.wait_closed(30s);
        });
        client_options o;
        o.tls.ca_file = shared_test_certs().cert_path();
        start_gateway("https://" + up.address(), o);
        test_client c(srv().port(), 60s);
        EXPECT_TRUE(c.send(get_request("/api/async/bytes"))) << c.error();
        return read_paced(
            c, 60s,
            // Whole at any length (a body cut short but framed as whole fails at once, not at the
            // limit): the chunked body's last chunk, or a 502.
            [](const std::string& got, std::size_t fresh) {
                return got.find("\r\n0\r\n\r\n", fresh) != std::string::npos ||
                       (got.starts_with("HTTP/1.1 502") &&
                        parse_response(got, false).status == parse_status::complete);
            },
            eof, pacing{.first_pause = 1000ms});
    }
};

TEST_P(gateway_tls_stream_test, a_close_delimited_body_ended_by_close_notify_reaches_a_pausing_reader_whole) {
    bool eof = false;
    const std::string raw = relay_close_delimited(true, eof);
    const auto parsed = parse_response(raw, eof);
    ASSERT_EQ(parsed.status, parse_status::complete) << raw.size() << " bytes: " << parsed.error;
    ASSERT_EQ(parsed.response.body.size(), total);
    EXPECT_EQ(parsed.response.body, pattern_from(0, total));
}

TEST_P(gateway_tls_stream_test, a_close_delimited_body_ended_by_a_bare_fin_is_cut_downstream) {
    bool eof = false;
    const std::string raw = relay_close_delimited(false, eof);
    // A 502 (the end came before the head went out: the connection stays open, its response
    // was whole) or a cut (the connection closed mid-body): never a whole 200.
    const auto parsed = parse_response(raw, true);
    const bool answered_502 = parsed.status == parse_status::complete && parsed.response.status == 502;
    EXPECT_TRUE(answered_502 || parsed.status != parse_status::complete)
        << "a body a bare FIN ended was relayed as whole (" << raw.size()
        << " bytes): " << printable(raw, 300);
    EXPECT_TRUE(answered_502 || eof) << "a cut stream must end with the connection (" << raw.size()
                                     << " bytes): " << printable(raw, 300);
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

SLUICE_BACKEND_SUITE(gateway_tls_stream_test);

} // namespace
} // namespace sluice::test
