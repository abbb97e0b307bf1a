// 1,000 coroutine handlers waiting at once, on every backend × dispatch mode: each awaits a
// generic operation that the test thread completes (from another thread, all at once), then
// a loop timer, then answers. On the blocking backend each waiting request holds a connection
// thread (DESIGN.md: async saves no threads there), so it gets enough of them.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include <sluice/coro.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/completion_box.h"
#include "support/multi_client.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t connections = 1000;

class coroutine_many_test : public backend_test {};

TEST_P(coroutine_many_test, thousand_waiting_coroutines_all_answered) {
    srv().config().io_threads = 2;
    srv().config().async_timeout_ms = 60'000;
    srv().config().blocking.threads = static_cast<std::uint32_t>(connections) + 16;
    srv().config().blocking.accept_queue = 256;
    // On the TLS rows a thousand handshakes share the machine: under ASan on a loaded CI machine
    // one took longer than the default 10 s from accept and was closed. The handshake timeout is
    // not under test here (tls_test is), so it gets room.
    srv().config().tls.handshake_timeout_ms = 60'000;
    auto box = std::make_shared<completion_box<std::string>>();
    srv().route("GET", "/many/{i}", [box](exchange& ex) -> task<> {
        const std::string i(ex.request().path_param("i").value_or("?"));
        result<std::string> r = co_await box->op();
        if (!r) {
            ex.response().status(500).text(r.error().message());
            co_return;
        }
        if (auto ec = co_await sleep_for(ex, milliseconds(10))) {
            co_return;
        }
        ex.response().text(*r + " " + i);
    });
    srv().start();

    multi_client mc;
    for (std::size_t i = 0; i < connections; ++i) {
        mc.add(srv().port(), get_request("/many/" + std::to_string(i)));
    }
    ASSERT_TRUE(mc.send_all(milliseconds(20'000))) << mc.first_error();
    ASSERT_TRUE(box->wait_for(connections, milliseconds(30'000))) << "waiting: " << box->size();
    ASSERT_TRUE(srv().wait_suspended(connections, milliseconds(30'000)))
        << "suspended: " << srv().stats().exchanges_suspended << " of " << connections;
    EXPECT_EQ(mc.responses_received(), 0u);

    for (auto& done : box->take_all()) {
        done(std::string("answer"));
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

SLUICE_BACKEND_SUITE(coroutine_many_test);

} // namespace
} // namespace sluice::test
