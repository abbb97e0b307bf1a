// A handler that throws after a complete() or resume() was accepted (issue 6, defect 6): the
// accepted call won the one terminal transition, so the exception is logged and changes
// nothing. The response is the completion's, on_error never fires, on_complete fires once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class async_throw_after_accept_test : public backend_test {
protected:
    /// GET target on a fresh connection; then the listener record must read "complete" alone,
    /// without error, and nothing may stay alive.
    void expect_response(std::string_view target, int status, std::string_view body) {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request(target))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, status);
        EXPECT_EQ(r->body, body);
        ASSERT_TRUE(events_.wait_for_count(1)) << events_.sequence();
        std::this_thread::sleep_for(milliseconds(50)); // a late on_error would show up by now
        EXPECT_EQ(events_.sequence(), "complete");
        EXPECT_FALSE(events_.events()[0].error) << events_.events()[0].error.message();
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_TRUE(srv().log().wait_for("threw")) << "the exception is still logged";
        // The connection stays usable: the outcome was a normal completion.
        ASSERT_TRUE(c.send(get_request("/next"))) << c.error();
        auto next = c.read_response();
        ASSERT_TRUE(next) << c.error();
        EXPECT_EQ(next->body, "next");
    }

    void add_next_route() {
        srv().route("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
    }
};

TEST_P(async_throw_after_accept_test, complete_with_a_response_then_throw) {
    srv().route("GET", "/x", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        EXPECT_TRUE(ctx.complete(response(201).text("handed over")));
        throw std::runtime_error("thrown after complete(r)");
    });
    add_next_route();
    srv().start();
    expect_response("/x", 201, "handed over");
}

TEST_P(async_throw_after_accept_test, complete_without_a_response_then_throw) {
    srv().route("GET", "/x", [this](exchange& ex) {
        ex.response().status(202).text("left by the handler");
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        EXPECT_TRUE(ctx.complete());
        throw std::runtime_error("thrown after complete()");
    });
    add_next_route();
    srv().start();
    expect_response("/x", 202, "left by the handler");
}

TEST_P(async_throw_after_accept_test, complete_from_another_thread_then_the_handler_throws) {
    srv().route("GET", "/x", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        auto accepted = std::make_shared<std::atomic<bool>>(false);
        bg_.run(
            [ctx, accepted]() mutable { *accepted = ctx.complete(response(200).text("from elsewhere")); });
        EXPECT_TRUE(wait_until([&] { return accepted->load(); }, milliseconds(2000)));
        throw std::runtime_error("thrown after another thread completed");
    });
    add_next_route();
    srv().start();
    expect_response("/x", 200, "from elsewhere");
}

TEST_P(async_throw_after_accept_test, resume_then_throw_runs_the_handler_again) {
    auto dispatches = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/x", [this, dispatches](exchange& ex) {
        ++*dispatches;
        if (ex.is_resumed()) {
            ex.response().text("resumed");
            return;
        }
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        EXPECT_TRUE(ctx.resume());
        throw std::runtime_error("thrown after resume()");
    });
    add_next_route();
    srv().start();
    expect_response("/x", 200, "resumed");
    EXPECT_EQ(dispatches->load(), 2);
}

TEST_P(async_throw_after_accept_test, resumed_handler_completes_then_throws) {
    srv().route("GET", "/x", [this](exchange& ex) {
        if (ex.is_resumed()) {
            auto again = ex.start_async(milliseconds(5000));
            EXPECT_TRUE(again.complete(response(200).text("second round")));
            throw std::runtime_error("thrown in the resumed dispatch");
        }
        auto ctx = ex.start_async(milliseconds(5000));
        events_.attach(ctx);
        bg_.run([ctx]() mutable { EXPECT_TRUE(ctx.resume()); });
    });
    add_next_route();
    srv().start();
    expect_response("/x", 200, "second round");
}

SLUICE_BACKEND_SUITE(async_throw_after_accept_test);

} // namespace
} // namespace sluice::test
