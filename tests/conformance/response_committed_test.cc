// response::is_committed() says whether a streamed response's head has gone to the connection,
// on every backend × dispatch mode. Writing a piece does not commit: the head goes out when the
// handler returns suspended (or finished). A resume() accepted before the handler returns
// re-dispatches at once, with nothing sent, so the handler may still replace the response
// with an error of its choosing; a throw then would be the core's 500 (a gateway wants 502).
// Once committed, a failure can only cut the stream.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class response_committed_test : public backend_test {};

TEST_P(response_committed_test, a_resume_before_the_handler_returns_leaves_the_stream_uncommitted) {
    std::atomic<int> committed_seen{-1};
    srv().route("GET", "/r", [&](exchange& ex) {
        if (ex.is_initial()) {
            ex.response().write("first piece");
            EXPECT_FALSE(ex.response().is_committed()) << "a write alone sends nothing";
            auto ctx = ex.start_async(milliseconds(5000));
            EXPECT_TRUE(ctx.resume()); // before returning: re-dispatched at once, nothing sent
            return;
        }
        committed_seen = ex.response().is_committed() ? 1 : 0;
        if (!ex.response().is_committed()) {
            ex.response() = response(502).text("upstream failed");
        }
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/r"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(committed_seen.load(), 0);
    EXPECT_EQ(r->status, 502);
    EXPECT_EQ(r->body, "upstream failed");
}

TEST_P(response_committed_test, a_stream_that_suspended_is_committed) {
    std::atomic<int> committed_seen{-1};
    srv().route("GET", "/s", [&](exchange& ex) {
        if (ex.is_initial()) {
            ex.response().write("first piece;");
            auto ctx = ex.start_async(milliseconds(5000));
            // on_drained runs only while the exchange is suspended: after the handler returned.
            EXPECT_TRUE(ctx.on_drained([ctx]() mutable { (void)ctx.resume(); }));
            return;
        }
        committed_seen = ex.response().is_committed() ? 1 : 0;
        ex.response().write("second piece");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "first piece;second piece");
    EXPECT_EQ(committed_seen.load(), 1) << "the head went out when the handler returned suspended";
}

SLUICE_BACKEND_SUITE(response_committed_test);

} // namespace
} // namespace sluice::test
