// client::stream, the awaitable streamed call (client_stream.h), on every backend × dispatch
// mode against a scripted upstream: the body arrives whole in bounded pieces and the connection
// goes back to the pool; an error before the head is send()'s; a cut body gives its pieces,
// then reset; a silent upstream gives response_timed_out; the upstream waits while the
// coroutine does not ask; destroying the stream mid-body and a client that leaves while next()
// waits both cancel the call and close its connection.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <sluice/client.h>
#include <sluice/coro.h>
#include <sluice/exchange.h>

#include "support/await_gate.h"
#include "support/backend_matrix.h"
#include "support/byte_pattern.h"
#include "support/error_text.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t cs_write_bytes = std::size_t{64} * 1024;

/// What the coroutine saw, for the cases whose downstream client does not read the answer.
struct cs_seen {
    std::atomic<int> pieces{0};
    std::atomic<bool> ended{false};
    std::mutex mu;
    std::error_code end_error;
};

/// The upstream's side: `total` bytes with Content-Length in blocking writes (so it is held by
/// TCP flow control while the client does not read), stopping silent after `stall_after`.
struct cs_upstream_script {
    std::size_t total = 0;
    std::size_t stall_after = SIZE_MAX;
    std::atomic<std::size_t> written{0};
    std::atomic<bool> write_failed{false};
    std::atomic<bool> saw_close{false};

    void run(upstream_conn& c) {
        if (!c.read_request()) {
            return;
        }
        if (!c.write("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n")) {
            write_failed = true;
            return;
        }
        const std::string piece = pattern_bytes(cs_write_bytes);
        for (std::size_t off = 0; off < std::min(total, stall_after); off += cs_write_bytes) {
            const std::size_t n = std::min({cs_write_bytes, total - off, stall_after - off});
            if (!c.write(std::string_view(piece).substr(0, n))) {
                write_failed = true;
                return;
            }
            written += n;
        }
        saw_close = c.wait_closed(20s);
    }
};

class client_stream_test : public backend_test {
protected:
    /// GET /read?drop=N&cancel=M: streams the upstream's answer and reports "status bytes pieces
    /// max end". After the first piece it awaits gate_; after `cancel` pieces it calls cancel();
    /// after `drop` pieces it destroys the stream.
    void start(const std::string& address, client_options o = {}) {
        client_ = std::make_unique<client>(upstream({address}), o);
        srv().route("GET", "/read", [this, seen = seen_, gate = gate_](exchange& ex) -> task<> {
            const int drop = std::stoi(std::string(ex.request().query_param("drop").value_or("0")));
            const int cancel_at = std::stoi(std::string(ex.request().query_param("cancel").value_or("0")));
            // A named request: GCC 12 destroys a braced temporary of a co_await expression twice
            // (GCC PR 99576).
            client_request up{.target = "/up"};
            result<client_body_stream> s = co_await client_->stream(ex.executor(), std::move(up));
            if (!s) {
                ex.response().text("await " + error_text(s.error()));
                co_return;
            }
            std::size_t bytes = 0;
            std::size_t largest = 0;
            int pieces = 0;
            while (auto piece = co_await s->next()) {
                bytes += piece->size();
                largest = std::max(largest, piece->size());
                seen->pieces = ++pieces;
                if (pieces == 1) {
                    co_await gate->wait(ex);
                }
                if (pieces == cancel_at) {
                    s->cancel(); // what was held still comes, then the end
                }
                if (pieces == drop) {
                    s = result<client_body_stream>(make_error_code(client_errc::cancelled)); // destroys it
                    ex.response().text("dropped");
                    co_return;
                }
            }
            {
                std::lock_guard lock(seen->mu);
                seen->end_error = s->error();
            }
            seen->ended = true;
            ex.response().text(std::to_string(s->head().status) + " " + std::to_string(bytes) + " " +
                               std::to_string(pieces) + " " + std::to_string(largest) + " " +
                               (s->error() ? error_text(s->error()) : "whole"));
        });
        srv().start();
    }

    std::string read_answer(const std::string& target = "/read") {
        test_client c(srv().port(), 20s);
        if (!c.send(get_request(target))) {
            return "send: " + c.error();
        }
        auto r = c.read_response();
        return r ? r->body : "read: " + c.error();
    }

    void TearDown() override {
        gate_->open();
        backend_test::TearDown();
        client_.reset();
    }

    std::unique_ptr<client> client_;
    std::shared_ptr<cs_seen> seen_ = std::make_shared<cs_seen>();
    std::shared_ptr<await_gate> gate_ = std::make_shared<await_gate>();
};

TEST_P(client_stream_test, a_body_arrives_whole_in_bounded_pieces_and_the_connection_is_pooled) {
    cs_upstream_script script{.total = std::size_t{4} << 20};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    gate_->open();
    const std::string answer = read_answer();
    const std::string prefix = "200 " + std::to_string(script.total) + " ";
    ASSERT_EQ(answer.substr(0, prefix.size()), prefix) << answer;
    EXPECT_NE(answer.find(" whole"), std::string::npos) << answer;
    std::istringstream fields(answer);
    std::size_t status = 0, bytes = 0, pieces = 0, largest = 0;
    fields >> status >> bytes >> pieces >> largest;
    EXPECT_LE(largest, client_body_stream::max_piece) << answer;
    EXPECT_TRUE(wait_until([&] { return client_->stats().idle == 1; })) << "not pooled";
    EXPECT_EQ(client_->stats().completed, 1u);
}

TEST_P(client_stream_test, an_error_before_the_head_is_the_await_s_as_for_send) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            c.reset();
        }
    });
    start(up.address());
    EXPECT_EQ(read_answer(), "await " + error_text(client_errc::reset));
}

TEST_P(client_stream_test, a_body_cut_upstream_gives_its_pieces_then_reset) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.write("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + pattern_bytes(300'000));
        }
    }); // returning closes the connection mid-body
    start(up.address());
    gate_->open();
    const std::string answer = read_answer();
    EXPECT_EQ(answer.substr(0, 11), "200 300000 ") << answer;
    EXPECT_NE(answer.find(error_text(client_errc::reset)), std::string::npos) << answer;
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }));
}

TEST_P(client_stream_test, an_upstream_silent_mid_body_gives_response_timed_out) {
    cs_upstream_script script{.total = std::size_t{1} << 20, .stall_after = cs_write_bytes};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address(), {.response_timeout = 300ms});
    gate_->open();
    const std::string answer = read_answer();
    EXPECT_EQ(answer.substr(0, 10), "200 65536 ") << answer;
    EXPECT_NE(answer.find(error_text(client_errc::response_timed_out)), std::string::npos) << answer;
    EXPECT_TRUE(wait_until([&] { return script.saw_close.load(); })) << "the upstream connection stayed open";
}

TEST_P(client_stream_test, the_upstream_waits_while_the_coroutine_does_not_ask_for_the_next_piece) {
    cs_upstream_script script{.total = std::size_t{64} << 20};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    test_client c(srv().port(), 30s);
    ASSERT_TRUE(c.send(get_request("/read"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return seen_->pieces.load() == 1; }));
    // The coroutine holds its first piece behind the gate: the client stops reading, and the
    // upstream is held by TCP flow control after the socket buffers (a few MiB on loopback).
    std::size_t before = 0;
    ASSERT_TRUE(wait_until(
        [&] {
            const std::size_t now = script.written.load();
            std::this_thread::sleep_for(200ms);
            before = script.written.load();
            return before == now;
        },
        10s))
        << "the upstream never stopped: " << script.written.load() << " bytes written";
    EXPECT_LT(before, std::size_t{24} << 20) << "the client kept reading while nobody asked";
    gate_->open();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body.substr(0, 12), "200 67108864") << r->body;
    EXPECT_NE(r->body.find(" whole"), std::string::npos) << r->body;
}

TEST_P(client_stream_test, destroying_the_stream_mid_body_cancels_the_call_and_closes_its_connection) {
    cs_upstream_script script{.total = std::size_t{1} << 30};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    gate_->open();
    test_client c(srv().port(), 20s);
    ASSERT_TRUE(c.send(get_request("/read?drop=3"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "dropped");
    EXPECT_TRUE(wait_until([&] { return script.write_failed.load() || script.saw_close.load(); }))
        << "the upstream connection stayed open";
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; })) << client_->stats().open;
    EXPECT_EQ(client_->stats().completed, 0u);
    EXPECT_TRUE(wait_until([&] { return client_->stats().failures(client_errc::cancelled) == 1; }));
}

TEST_P(client_stream_test, cancel_mid_body_ends_the_body_with_cancelled_and_closes_the_connection) {
    cs_upstream_script script{.total = std::size_t{1} << 30};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    gate_->open();
    const std::string answer = read_answer("/read?cancel=2");
    EXPECT_NE(answer.find(error_text(client_errc::cancelled)), std::string::npos) << answer;
    EXPECT_TRUE(wait_until([&] { return script.write_failed.load() || script.saw_close.load(); }))
        << "the upstream connection stayed open";
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; })) << client_->stats().open;
}

TEST_P(client_stream_test, a_pending_next_completes_with_cancelled_when_the_client_leaves) {
    cs_upstream_script script{.total = std::size_t{1} << 20, .stall_after = cs_write_bytes};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    gate_->open();
    {
        test_client c(srv().port(), 20s);
        ASSERT_TRUE(c.send(get_request("/read"))) << c.error();
        ASSERT_TRUE(
            wait_until([&] { return seen_->pieces.load() >= 1 && script.written == cs_write_bytes; }));
        // The coroutine now waits in next() for bytes that do not come.
        ASSERT_TRUE(srv().wait_suspended(1));
        c.close_abortive();
    }
    ASSERT_TRUE(wait_until([&] { return seen_->ended.load(); })) << "next() still pending";
    {
        std::lock_guard lock(seen_->mu);
        EXPECT_EQ(seen_->end_error, std::errc::operation_canceled) << seen_->end_error.message();
    }
    EXPECT_TRUE(wait_until([&] { return script.saw_close.load(); })) << "the upstream connection stayed open";
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }));
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

SLUICE_BACKEND_SUITE(client_stream_test);

} // namespace
} // namespace sluice::test
