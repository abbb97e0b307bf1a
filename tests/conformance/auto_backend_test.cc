// backend = auto: the first registered reactor backend that probes well, logged with the
// reasons the others were passed over; never the blocking backend.
#include <gtest/gtest.h>

#include <string>

#include <sluice/backend.h>
#include <sluice/exchange.h>

#include "support/test_client.h"
#include "support/test_server.h"

namespace sluice::test {
namespace {

// What auto should pick on this machine, by the registry's own order and probes.
std::string expected_auto_choice() {
    io::driver_options o;
    for (const io::backend* b : io::registered_backends()) {
        if (!b->traits.connection_per_thread && b->probe(o).empty()) {
            return std::string(b->name);
        }
    }
    return "";
}

TEST(auto_backend, picks_the_first_available_reactor_and_says_so) {
    const std::string expected = expected_auto_choice();
    ASSERT_FALSE(expected.empty()) << "no reactor backend can run here";
    test_server srv("auto", dispatch_mode::inline_io);
    srv.route("GET", "/", [](exchange& ex) { ex.response().text("auto"); });
    srv.start();
    EXPECT_EQ(srv.server().backend_name(), expected);
    EXPECT_TRUE(srv.log().contains("backend auto: chose " + expected)) << "the choice must be logged";
    test_client c(srv.port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "auto");
}

TEST(auto_backend, prefers_io_uring_where_the_kernel_allows_it) {
    // On this project's machines (kernel 6.18, io_uring enabled) auto must mean uring; where
    // uring cannot run, the first test above covers the fallback.
    for (const io::backend* b : io::registered_backends()) {
        if (b->name == "uring") {
            const std::string why = b->probe(io::driver_options{});
            if (!why.empty()) {
                GTEST_SKIP() << "io_uring cannot run on this machine: " << why;
            }
            EXPECT_EQ(expected_auto_choice(), "uring");
            return;
        }
    }
    GTEST_SKIP() << "this build has no uring backend (liburing-dev missing at configure time)";
}

} // namespace
} // namespace sluice::test
