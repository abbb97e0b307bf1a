// A client that sends its request and its FIN in one go, then waits (issue 6, defect 7): the
// FIN arrives with the data, before the connection pauses receiving. Rule 6 of backend.h says
// a paused receiver still hears the peer leave, so a suspended exchange must end with on_error
// at once, not at its (long) async timeout — on every backend × dispatch mode.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <sluice/error.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// Far beyond the test's patience: an exchange that ends by its timeout fails the test.
constexpr milliseconds hold_timeout{20'000};
// on_error must come "promptly": well before the timeout, with room for TSan.
constexpr milliseconds prompt{3'000};

class half_close_test : public backend_test {
protected:
    void add_routes() {
        srv().route("GET", "/hold", [this](exchange& ex) {
            auto ctx = ex.start_async(hold_timeout);
            events_.attach(ctx);
            contexts_.add(ctx);
        });
        srv().route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
    }

    /// Sends bytes and the FIN together; on_error(client_disconnected) then on_complete must
    /// follow within `prompt`, and everything is freed.
    void send_then_half_close(const std::string& bytes) {
        events_.clear();
        test_client c(srv().port());
        const auto from = test_clock::now();
        ASSERT_TRUE(c.send(bytes)) << c.error();
        c.shutdown_write();
        ASSERT_TRUE(events_.wait_for_count(2, prompt))
            << "events after " << prompt.count() << " ms: \"" << events_.sequence()
            << "\" (the suspended exchange did not hear the FIN)";
        EXPECT_LT(test_clock::now() - from, prompt);
        std::this_thread::sleep_for(milliseconds(50)); // a duplicate would show up by now
        EXPECT_EQ(events_.sequence(), "error,complete");
        EXPECT_EQ(events_.events()[0].error, make_error_code(exchange_errc::client_disconnected))
            << events_.events()[0].error.message();
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
            << "connections_open = " << srv().stats().connections_open;
    }
};

TEST_P(half_close_test, request_and_fin_together_end_the_suspended_exchange) {
    add_routes();
    srv().start();
    send_then_half_close(get_request("/hold"));
}

TEST_P(half_close_test, fin_behind_a_pipelined_backlog_that_pauses_receiving) {
    // The suspended request is followed by more pipelined requests than the connection buffers
    // (64 KiB), so receiving pauses with the FIN already seen behind the data. Not much more:
    // the rest must fit the socket's receive queue, or the FIN would wait behind a closed TCP
    // window and the server could not know the client left.
    add_routes();
    srv().start();
    std::string bytes = get_request("/hold");
    while (bytes.size() < 96 * 1024) {
        bytes += get_request("/next");
    }
    // Whether the FIN is seen before the pause depends on timing: try a few times.
    for (int i = 0; i < 5 && !HasFailure(); ++i) {
        send_then_half_close(bytes);
    }
}

SLUICE_BACKEND_SUITE(half_close_test);

} // namespace
} // namespace sluice::test
