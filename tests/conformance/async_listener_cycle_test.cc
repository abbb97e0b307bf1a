// A listener may hold its own async_context, on every backend × dispatch mode. Completing from
// a timeout listener through a captured context is the obvious way to write a fallback:
//
//     auto ctx = ex.start_async(2s);
//     ctx.on_timeout([ctx](const async_event&) mutable { ctx.complete(response(504)); });
//
// The listeners live in the exchange's async state and the context holds that state: unless
// the state lets go of its listeners when the exchange is released, each such request leaks
// the state, the listener and all it captured.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class async_listener_cycle_test : public backend_test {
protected:
    /// What every listener captures beside its context: gone once the listeners are. Made on
    /// the server's thread, looked at on the test's: the mutex orders the two.
    std::mutex mu_;
    std::weak_ptr<int> sentinel_;

    std::shared_ptr<int> make_sentinel() {
        auto s = std::make_shared<int>(0);
        std::lock_guard lock(mu_);
        sentinel_ = s;
        return s;
    }

    bool sentinel_gone() {
        std::lock_guard lock(mu_);
        return sentinel_.expired();
    }

    void expect_released(const char* path) {
        srv().start();
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request(path))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 200);
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_TRUE(wait_until([&] { return sentinel_gone(); }))
            << "a listener that holds its context was never destroyed: the async state leaks";
    }
};

TEST_P(async_listener_cycle_test, a_timeout_listener_that_completes_through_its_captured_context_is_freed) {
    srv().route("GET", "/t", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(50));
        EXPECT_TRUE(ctx.on_timeout([ctx, s = make_sentinel()](const async_event&) mutable {
            ctx.complete(response(200).text("fallback"));
        }));
    });
    expect_released("/t");
}

TEST_P(async_listener_cycle_test, listeners_that_hold_their_context_are_freed_after_a_normal_completion) {
    srv().route("GET", "/c", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(10'000));
        auto s = make_sentinel();
        EXPECT_TRUE(ctx.on_timeout([ctx, s](const async_event&) mutable { ctx.complete(response(504)); }));
        EXPECT_TRUE(ctx.on_error([ctx, s](const async_event&) {}));
        EXPECT_TRUE(ctx.on_complete([ctx, s](const async_event&) {}));
        EXPECT_TRUE(ex.executor().post([ctx]() mutable { ctx.complete(response(200).text("done")); }));
    });
    expect_released("/c");
}

SLUICE_BACKEND_SUITE(async_listener_cycle_test);

} // namespace
} // namespace sluice::test
