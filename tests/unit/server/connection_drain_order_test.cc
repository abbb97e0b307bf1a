// on_drained() and the piece written just before it, on the real connection over the
// in-memory driver: a callback registered while suspended (as sluice::drained does for a
// coroutine) runs only after what was written before it was queued, even when the completion
// of an earlier send reaches the connection before the registration's signal does (the loop
// takes completions before its mailbox). Found as a rare failure of coroutine_stream_test's
// declared-length case under ASan: the second drained() reported success for a piece past
// the declared length.
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"

namespace sluice::testing {
namespace {

struct drain_order_run {
    std::string out;
    bool second_ran = false;
};

// Declares 10 bytes and writes "12345" while dispatching; the first drain writes `more` and
// registers a second on_drained(), which records whether it ran and completes the exchange.
drain_order_run declared_then(std::string more) {
    drain_order_run run;
    router r;
    r.add("GET", "/declared", [&run, more](exchange& ex) {
        async_context ctx = ex.start_async();
        ex.response().content_length(10);
        ex.response().write("12345");
        ctx.on_drained([&ex, ctx, &run, more]() mutable {
            ex.response().write(more); // on the loop, while suspended: as a resumed coroutine
            ctx.on_drained([&run, ctx]() mutable {
                run.second_ran = true;
                ctx.complete(); // the stream ends: the loop can go idle
            });
        });
    });
    config cfg;
    const logger log{log_level::error, [](log_level, std::string_view) {}};
    detail::server_context ctx{cfg, r, log};
    auto d = std::make_unique<fake_driver>();
    fake_driver& drv = *d;
    drv.peers[100].inbound = "GET /declared HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    detail::loop loop{std::move(d), log, 0};
    detail::loop_context lc{loop, ctx};
    detail::adopt_connection(lc, 100, detail::listener_kind::plain);
    loop.run(detail::loop::run_mode::until_idle);
    run.out = drv.peers[100].outbound;
    return run;
}

TEST(connection_drain_order, a_piece_within_the_length_is_queued_before_the_next_drain_runs) {
    const drain_order_run run = declared_then("xxxxx");
    EXPECT_TRUE(run.second_ran);
    EXPECT_TRUE(run.out.ends_with("\r\n\r\n12345xxxxx")) << run.out;
}

TEST(connection_drain_order, a_piece_past_the_length_fails_the_exchange_and_the_next_drain_never_runs) {
    const drain_order_run run = declared_then("xxxxxx");
    EXPECT_FALSE(run.second_ran)
        << "on_drained() reported a drain before the piece written with it was queued";
    EXPECT_NE(run.out.find("Content-Length: 10\r\n"), std::string::npos) << run.out;
    EXPECT_EQ(run.out.find('x'), std::string::npos) << "bytes past the declared length went out: " << run.out;
}

} // namespace
} // namespace sluice::testing
