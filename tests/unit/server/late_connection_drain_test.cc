// A connection accepted after the drain of a hand-over began, on a loop that had none when it
// began: on io_uring an accept that completed in the kernel before the listener's cancellation
// is reported after the stop hook ran. A hand-over keeps such a connection to read its request
// (closing it would race with a request in flight); it is then drained like the others: a
// suspended exchange ends with on_error(shutting_down) and 503 once shutdown_timeout_ms is up,
// not when its own async timeout comes, nor an idle one at idle_timeout_ms.
#include <gtest/gtest.h>

#include <chrono>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"

namespace sluice::testing {
namespace {

TEST(late_connection_drain, a_connection_adopted_after_an_empty_drain_began_is_ended_at_the_drain_timeout) {
    std::error_code ended_by;
    router r;
    r.add("GET", "/wait", [&ended_by](exchange& ex) {
        async_context ctx = ex.start_async(); // never completed: only the server can end it
        ctx.on_error([&ended_by](const async_event& e) { ended_by = e.error; });
        ctx.on_timeout([&ended_by](const async_event& e) { ended_by = e.error; });
    });
    config cfg;
    cfg.async_timeout_ms = 3000; // what ends it if the drain does not
    cfg.shutdown_timeout_ms = 50;
    const logger log{log_level::error, [](log_level, std::string_view) {}};
    detail::server_context ctx{cfg, r, log};
    ctx.drain_idle_after_response.store(true); // a hand-over
    auto d = std::make_unique<fake_driver>();
    fake_driver& drv = *d;
    drv.peers[100].inbound = "GET /wait HTTP/1.1\r\nHost: a\r\n\r\n";
    detail::loop loop{std::move(d), log, 0};
    detail::loop_context lc{loop, ctx};
    lc.begin_shutdown(); // the stop hook, with no connection on this loop yet
    const auto began = std::chrono::steady_clock::now();
    detail::adopt_connection(lc, 100, detail::listener_kind::plain);
    loop.run(detail::loop::run_mode::until_idle);
    const auto took = std::chrono::steady_clock::now() - began;

    EXPECT_EQ(ended_by, make_error_code(exchange_errc::shutting_down)) << "ended by: " << ended_by.message();
    EXPECT_LT(took, std::chrono::seconds(2)) << "the drain did not bound the late connection";
    EXPECT_TRUE(drv.peers[100].outbound.starts_with("HTTP/1.1 503 ")) << drv.peers[100].outbound;
}

} // namespace
} // namespace sluice::testing
