// The watchdog (DESIGN.md: "a blocking handler stalls the loop, and a watchdog must say so
// loudly in the log"), on every backend × dispatch mode. Only a reactor loop running handlers
// inline can be stalled by one; with a pool, or one connection per thread, nothing must cry
// wolf.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class watchdog_test : public backend_test {};

TEST_P(watchdog_test, blocking_handler_on_the_io_thread_is_reported) {
    srv().config().watchdog_ms = 100;
    srv().route("GET", "/block", [](exchange& ex) {
        std::this_thread::sleep_for(milliseconds(400));
        ex.response().text("done");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/block"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "done");
    const bool stalls_a_loop = !pool_dispatch() && !connection_per_thread();
    if (stalls_a_loop) {
        EXPECT_TRUE(srv().log().wait_for("WATCHDOG", milliseconds(1000)))
            << "a handler blocked the I/O loop for 400 ms and nothing was logged";
    } else {
        std::this_thread::sleep_for(milliseconds(100));
        EXPECT_FALSE(srv().log().contains("WATCHDOG")) << "no I/O loop was blocked";
    }
}

SLUICE_BACKEND_SUITE(watchdog_test);

} // namespace
} // namespace sluice::test
