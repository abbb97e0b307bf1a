// 1,000 requests suspended at once on 1,000 connections, on every backend × dispatch mode,
// all answered once the test completes them. One client thread drives every connection.
// On the blocking backend each suspended request holds a connection thread (DESIGN.md:
// async saves no threads there), so it gets enough of them.
#include <gtest/gtest.h>

#include <chrono>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/multi_client.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t connections = 1000;

class many_suspended_test : public backend_test {};

TEST_P(many_suspended_test, thousand_suspended_requests_all_answered) {
    srv().config().io_threads = 2;
    srv().config().blocking.threads = static_cast<std::uint32_t>(connections) + 16;
    srv().config().blocking.accept_queue = 256;
    // On the TLS rows a thousand handshakes share the machine: under ASan on a loaded CI machine
    // one took longer than the default 10 s from accept and was closed. The handshake timeout is
    // not under test here (tls_test is), so it gets room.
    srv().config().tls.handshake_timeout_ms = 60'000;
    srv().route("GET", "/many/{i}", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(60'000));
        ctx.set_attribute("i", std::string(ex.request().path_param("i").value_or("?")));
        contexts_.add(ctx);
    });
    srv().start();

    multi_client mc;
    for (std::size_t i = 0; i < connections; ++i) {
        mc.add(srv().port(), get_request("/many/" + std::to_string(i)));
    }
    ASSERT_TRUE(mc.send_all(milliseconds(20'000))) << mc.first_error();
    ASSERT_TRUE(srv().wait_suspended(connections, milliseconds(30'000)))
        << "suspended: " << srv().stats().exchanges_suspended << " of " << connections;
    EXPECT_EQ(mc.responses_received(), 0u);

    auto all = contexts_.take_all();
    ASSERT_EQ(all.size(), connections);
    for (auto& ctx : all) {
        EXPECT_TRUE(
            ctx.complete(response(200).text("answer " + ctx.attribute<std::string>("i").value_or("?"))));
    }
    ASSERT_TRUE(mc.read_all(milliseconds(30'000)))
        << mc.first_error() << " (" << mc.responses_received() << " of " << connections << " answered)";
    for (std::size_t i = 0; i < connections; ++i) {
        ASSERT_TRUE(mc.response(i).has_value()) << i;
        EXPECT_EQ(mc.response(i)->status, 200) << i;
        EXPECT_EQ(mc.response(i)->body, "answer " + std::to_string(i)) << i;
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

SLUICE_BACKEND_SUITE(many_suspended_test);

} // namespace
} // namespace sluice::test
