// The real loop and connection over the in-memory driver: a pipelined script of sync,
// chunked, async (complete) and async (resume) requests, delivered whole, in 7-byte
// pieces and one byte at a time, with partial writes, and with the N-th I/O operation
// failing for every N. Whatever fails, the loop finishes, every exchange is freed,
// on_complete runs exactly once per async exchange, and what reached the client is a
// prefix of the correct answer (never garbage, never out of order).
#include <gtest/gtest.h>

#include <atomic>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"

namespace sluice::testing {
namespace {

const std::string fault_script = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
                                 "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
                                 "GET /async HTTP/1.1\r\nHost: a\r\n\r\n"
                                 "GET /resume HTTP/1.1\r\nHost: a\r\n\r\n"
                                 "GET /last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

struct fault_harness {
    config cfg;
    router routes;
    logger log{log_level::error};
    detail::server_context server_ctx{cfg, routes, log};
    fake_driver* drv = nullptr;
    std::unique_ptr<detail::loop> loop;
    std::unique_ptr<detail::loop_context> lc;
    int async_started = 0;
    int on_complete_calls = 0;

    fault_harness() {
        routes.add("GET", "/", [](exchange& ex) { ex.response().text("root"); });
        routes.add("POST", "/echo",
                   [](exchange& ex) { ex.response().text(std::string(ex.request().body())); });
        routes.add("GET", "/async", [this](exchange& ex) {
            auto ctx = ex.start_async();
            ++async_started;
            ctx.on_complete([this](const async_event&) { ++on_complete_calls; });
            ex.executor().post([ctx]() mutable { ctx.complete(response(200).text("async")); });
        });
        routes.add("GET", "/resume", [this](exchange& ex) {
            if (ex.is_resumed()) {
                ex.response().text("resumed " + ex.attribute<std::string>("v").value_or("?"));
                return;
            }
            auto ctx = ex.start_async();
            ++async_started;
            ctx.on_complete([this](const async_event&) { ++on_complete_calls; });
            ex.executor().post([ctx]() mutable {
                ctx.set_attribute("v", std::string("yes"));
                ctx.resume();
            });
        });
        routes.add("GET", "/last", [](exchange& ex) { ex.response().text("last"); });
        auto d = std::make_unique<fake_driver>();
        drv = d.get();
        loop = std::make_unique<detail::loop>(std::move(d), log, 0);
        lc = std::make_unique<detail::loop_context>(*loop, server_ctx);
    }

    std::string run(std::size_t chunk, std::size_t send_limit, long fail_at) {
        drv->chunk = chunk;
        drv->send_limit = send_limit;
        drv->fail_at = fail_at;
        drv->peers[100].inbound = fault_script;
        detail::adopt_connection(*lc, 100, detail::listener_kind::plain);
        loop->run(detail::loop::run_mode::until_idle);
        return drv->peers[100].outbound;
    }
};

// Every "Date: ..." value becomes "-" (also a Date line cut short by a failing write: it still
// compares as a prefix).
std::string without_dates(const std::string& s) {
    std::string out;
    std::size_t pos = 0;
    for (std::size_t d; (d = s.find("Date: ", pos)) != std::string::npos;) {
        out.append(s, pos, d - pos).append("Date: -");
        const std::size_t end = s.find('\r', d);
        pos = end == std::string::npos ? s.size() : end;
    }
    return out.append(s, pos, std::string::npos);
}

std::string clean_answer(long* operations = nullptr) {
    fault_harness h;
    std::string out = h.run(static_cast<std::size_t>(-1), static_cast<std::size_t>(-1), -1);
    if (operations != nullptr) {
        *operations = h.drv->operations;
    }
    return without_dates(out);
}

TEST(connection_faults, the_clean_run_answers_everything_in_order) {
    fault_harness h;
    const std::string out =
        without_dates(h.run(static_cast<std::size_t>(-1), static_cast<std::size_t>(-1), -1));
    const auto root = out.find("\r\n\r\nroot");
    const auto echo = out.find("\r\n\r\nabcdefg");
    const auto async = out.find("\r\n\r\nasync");
    const auto resumed = out.find("\r\n\r\nresumed yes");
    const auto last = out.find("\r\n\r\nlast");
    ASSERT_NE(root, std::string::npos) << out;
    ASSERT_NE(echo, std::string::npos) << out;
    ASSERT_NE(async, std::string::npos) << out;
    ASSERT_NE(resumed, std::string::npos) << out;
    ASSERT_NE(last, std::string::npos) << out;
    EXPECT_LT(root, echo);
    EXPECT_LT(echo, async);
    EXPECT_LT(async, resumed);
    EXPECT_LT(resumed, last);
    EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
    EXPECT_TRUE(h.drv->peers[100].closed);
    EXPECT_EQ(h.on_complete_calls, h.async_started);
    EXPECT_EQ(h.lc->counters.exchanges_live.load(), 0u);
    EXPECT_EQ(h.lc->counters.open.load(), 0u);
}

struct shape {
    std::size_t chunk;
    std::size_t send_limit;
};

class connection_fault_matrix : public ::testing::TestWithParam<shape> {};

TEST_P(connection_fault_matrix, every_failing_operation_ends_cleanly_with_a_prefix_of_the_answer) {
    long clean_ops = 0;
    const std::string expected = clean_answer(&clean_ops);
    // The shape changes how many operations a clean run takes: count them for this shape.
    long shape_ops = 0;
    {
        fault_harness h;
        const std::string out = without_dates(h.run(GetParam().chunk, GetParam().send_limit, -1));
        EXPECT_EQ(out, expected) << "delivery shape must not change the answer";
        shape_ops = h.drv->operations;
    }
    ASSERT_GT(shape_ops, 0);
    for (long n = 0; n <= shape_ops; ++n) {
        fault_harness h;
        const std::string out = without_dates(h.run(GetParam().chunk, GetParam().send_limit, n));
        SCOPED_TRACE("failing operation " + std::to_string(n) + " of " + std::to_string(shape_ops));
        EXPECT_EQ(expected.compare(0, out.size(), out), 0) << "not a prefix:\n" << out;
        EXPECT_TRUE(h.drv->peers[100].closed);
        EXPECT_EQ(h.on_complete_calls, h.async_started);
        EXPECT_EQ(h.lc->counters.exchanges_live.load(), 0u);
        EXPECT_EQ(h.lc->counters.open.load(), 0u);
        EXPECT_EQ(h.lc->counters.suspended.load(), 0u);
        if (n == shape_ops) {
            EXPECT_EQ(out, expected); // past the last operation nothing fails
        }
    }
}

INSTANTIATE_TEST_SUITE_P(shapes, connection_fault_matrix,
                         ::testing::Values(shape{static_cast<std::size_t>(-1), static_cast<std::size_t>(-1)},
                                           shape{1, static_cast<std::size_t>(-1)}, shape{7, 5},
                                           shape{static_cast<std::size_t>(-1), 1}),
                         [](const auto& param_info) {
                             const auto& s = param_info.param;
                             auto n = [](std::size_t v) {
                                 return v == static_cast<std::size_t>(-1) ? std::string("all")
                                                                          : std::to_string(v);
                             };
                             return "read_" + n(s.chunk) + "_write_" + n(s.send_limit);
                         });

TEST(connection_faults, peer_that_leaves_while_suspended_fires_error_then_complete_once) {
    fault_harness h;
    h.routes = router();
    std::vector<std::string> events;
    async_context kept;
    h.routes.add("GET", "/wait", [&](exchange& ex) {
        kept = ex.start_async();
        kept.on_error([&](const async_event& e) {
            events.push_back("error:" +
                             std::string(e.error == exchange_errc::client_disconnected ? "gone" : "?"));
        });
        kept.on_complete([&](const async_event&) { events.push_back("complete"); });
    });
    h.drv->peers[100].inbound = "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n";
    h.drv->peers[100].eof_at_end = true;
    detail::adopt_connection(*h.lc, 100, detail::listener_kind::plain);
    h.loop->run(detail::loop::run_mode::until_idle);
    EXPECT_EQ(events, (std::vector<std::string>{"error:gone", "complete"}));
    EXPECT_TRUE(kept.is_done());
    EXPECT_FALSE(kept.complete(response(200)));
    EXPECT_FALSE(kept.resume());
    EXPECT_EQ(h.drv->peers[100].outbound, "");
    EXPECT_EQ(h.lc->counters.exchanges_live.load(), 0u);
}

} // namespace
} // namespace sluice::testing
