// The bytes of a response stay one well-framed message whatever the handler does, on every
// backend × dispatch mode, and the next request on the same connection gets its own answer
// (a framing error would desynchronise keep-alive):
// - a complete(r) that lands while a resumed handler runs, after the stream's head went out;
// - streamed responses whose status has no content (204, 304);
// - a 1xx status set by a handler (a programming error: 500, logged).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/next_request.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class response_framing_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        route_next(srv());
    }
};

TEST_P(response_framing_test, complete_with_a_response_during_a_resumed_stream_adds_only_its_body) {
    struct state {
        std::atomic<bool> completed{false};
    };
    auto st = std::make_shared<state>();
    srv().route("GET", "/s", [this, st](exchange& ex) {
        if (!ex.is_resumed()) {
            ex.response().status(200).write("first ");
            contexts_.add(ex.start_async(milliseconds(5000)));
            return; // the head and "first " go out as the handler suspends
        }
        ex.response().write("second ");
        auto ctx = ex.start_async(milliseconds(5000));
        // complete(r) from another thread while this resumed dispatch still runs: deferred
        // until it returns, when the stream's head is already on the wire.
        bg_.run([ctx, st]() mutable {
            st->completed = ctx.complete(response(201).header("X-Late", "1").text("tail"));
        });
        EXPECT_TRUE(wait_until([&] { return st->completed.load(); }, milliseconds(2000)));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/s"))) << c.error();
    // Resume only once the head is on the wire (a resume before the handler returned would
    // re-dispatch before anything was sent).
    ASSERT_TRUE(c.read_until_contains("first ")) << c.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).resume());
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->chunked);
    EXPECT_EQ(r->body, "first second tail");
    EXPECT_FALSE(r->header("X-Late")) << "the head went out before the handed response existed";
    expect_next_answered(c);
}

TEST_P(response_framing_test, streamed_204_has_no_body_and_no_chunk_framing) {
    srv().route("GET", "/204", [](exchange& ex) { ex.response().status(204).write("dropped"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/204"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 204);
    EXPECT_FALSE(r->header("Transfer-Encoding"));
    EXPECT_FALSE(r->header("Content-Length"));
    EXPECT_EQ(r->body, "");
    expect_next_answered(c);
}

TEST_P(response_framing_test, streamed_304_after_suspending_has_no_body_and_no_chunk_framing) {
    srv().route("GET", "/304", [this](exchange& ex) {
        ex.response().status(304).header("ETag", "\"x\"").write("part one");
        contexts_.add(ex.start_async(milliseconds(5000)));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/304"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 304);
    EXPECT_EQ(r->header("ETag"), "\"x\"");
    EXPECT_FALSE(r->header("Transfer-Encoding"));
    EXPECT_EQ(r->body, "");
    // The head is out: what complete(r) hands over can only add body bytes, and a 304 has none.
    ASSERT_TRUE(contexts_.wait_for(1));
    EXPECT_TRUE(contexts_.at(0).complete(response(200).text("part two")));
    expect_next_answered(c);
}

TEST_P(response_framing_test, handler_set_1xx_status_is_a_500) {
    srv().route("GET", "/1xx", [](exchange& ex) { ex.response().status(103).text("early hints?"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/1xx"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 500) << "a 1xx is interim: the client would wait for a final response";
    EXPECT_TRUE(srv().log().wait_for("103"));
    expect_next_answered(c);
}

TEST_P(response_framing_test, handler_set_1xx_status_on_a_stream_is_a_500) {
    srv().route("GET", "/1xx", [](exchange& ex) { ex.response().status(101).write("not switching"); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/1xx"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 500) << "Upgrade is ignored: a 101 would switch to nothing";
    expect_next_answered(c);
}

SLUICE_BACKEND_SUITE(response_framing_test);

} // namespace
} // namespace sluice::test
