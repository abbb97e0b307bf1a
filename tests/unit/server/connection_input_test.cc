// The input buffer of a connection stays bounded whatever a pipelining client does: one that
// always keeps a partial request behind whole ones, against an async route (the exchange is
// busy while more arrives), must not make the buffer keep every byte it ever sent.
// The real loop and connection over the in-memory driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"
#include "server/connection.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"

namespace sluice::testing {
namespace {

struct input_harness {
    config cfg;
    router routes;
    logger log{log_level::error};
    detail::server_context server_ctx{cfg, routes, log};
    fake_driver* drv = nullptr;
    std::unique_ptr<detail::loop> loop;
    std::unique_ptr<detail::loop_context> lc;
    std::size_t answered = 0;
    std::size_t max_input_held = 0;

    input_harness() {
        routes.add("GET", "/a", [this](exchange& ex) {
            // Measured while the exchange is busy: what the connection holds for its input.
            for (const detail::connection* c : lc->connections()) {
                max_input_held = std::max(max_input_held, c->input_bytes_held());
            }
            auto ctx = ex.start_async();
            ex.executor().post([this, ctx]() mutable {
                ++answered;
                ctx.complete(response(200).text("a"));
            });
        });
        auto d = std::make_unique<fake_driver>();
        drv = d.get();
        loop = std::make_unique<detail::loop>(std::move(d), log, 0);
        lc = std::make_unique<detail::loop_context>(*loop, server_ctx);
    }
};

TEST(connection_input, pipelined_requests_behind_a_busy_exchange_keep_the_buffer_bounded) {
    input_harness h;
    const std::string one = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
    constexpr std::size_t requests = 20'000;
    std::string script;
    script.reserve(one.size() * requests);
    for (std::size_t i = 0; i < requests; ++i) {
        script += one;
    }
    script += "GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    // Deliveries that never end on a request boundary for long: a partial request always
    // stays behind whole ones, so the parsed prefix is never "all of it".
    h.drv->chunk = 61;
    h.drv->peers[100].inbound = script;
    h.drv->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    detail::adopt_connection(*h.lc, 100, detail::listener_kind::plain);
    h.loop->run(detail::loop::run_mode::until_idle);

    EXPECT_EQ(h.answered, requests + 1);
    EXPECT_TRUE(h.drv->peers[100].closed);
    // The whole script is ~600 KiB; the connection may hold the unparsed backlog (paused at
    // 64 KiB) plus a delivery or two, never the consumed prefix.
    EXPECT_LE(h.max_input_held, std::size_t{160} * 1024)
        << "input buffer held " << h.max_input_held << " bytes of a " << script.size() << "-byte script";
    EXPECT_EQ(h.lc->counters.exchanges_live.load(), 0u);
}

// Receiving pauses behind a full output buffer; reads made before the pause took effect still
// come, and the pause ends (the output drained) before its final completion and the hang-up heard
// while paused reach the connection, which is receiving again by then. The requests still ahead
// of the FIN are read and answered: that hang-up is not the end of the stream (backend.h rule 6).
TEST(connection_input, a_hang_up_heard_while_paused_after_late_reads_still_reads_what_is_ahead_of_it) {
    input_harness h;
    const std::string body(std::size_t{64} * 1024, 'b');
    h.routes.add("GET", "/big", [&body](exchange& ex) { ex.response().text(body); });
    const std::string one = "GET /big HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(2000, 'p') + "\r\n\r\n";
    constexpr std::size_t requests = 100;
    std::string script;
    for (std::size_t i = 0; i < requests; ++i) {
        script += one;
    }
    for (const std::size_t late : {std::size_t{1}, std::size_t{4}}) {
        SCOPED_TRACE(late);
        const int fd = 100 + static_cast<int>(late);
        h.drv->chunk = 16 * 1024;
        h.drv->peers[fd].inbound = script;
        h.drv->peers[fd].eof_at_end = true;
        h.drv->peers[fd].hang_up_while_paused = true;
        h.drv->peers[fd].reads_after_pause = late;
        h.drv->peers[fd].waits_before_cancel = 20; // the output drains meanwhile: receiving resumes
        detail::adopt_connection(*h.lc, fd, detail::listener_kind::plain);
        h.loop->run(detail::loop::run_mode::until_idle);
        const std::string& out = h.drv->peers[fd].outbound;
        std::size_t answers = 0;
        for (std::size_t at = out.find("HTTP/1.1 200"); at != std::string::npos;
             at = out.find("HTTP/1.1 200", at + 1)) {
            ++answers;
        }
        EXPECT_EQ(h.drv->peers[fd].delivered, script.size()) << "bytes ahead of the FIN were never read";
        EXPECT_EQ(answers, requests);
        EXPECT_TRUE(h.drv->peers[fd].closed);
    }
}

} // namespace
} // namespace sluice::testing
