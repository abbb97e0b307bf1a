// executor.h across a server stop, on every backend × dispatch mode (issue 6, defect 11):
// once the loop has stopped, post() and post_after() return false and destroy the function
// without running it, even while the stopped server (and its loops) still exist; a task
// accepted before is either run or destroyed, never kept forever.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include <sluice/exchange.h>
#include <sluice/executor.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class executor_stop_test : public backend_test {
protected:
    /// Serves one request whose handler keeps the exchange's executor in kept_.
    void keep_an_executor() {
        srv().route("GET", "/e", [this](exchange& ex) {
            std::lock_guard lock(mu_);
            kept_ = ex.executor();
            ex.response().text("ok");
        });
        srv().start();
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/e"))) << c.error();
        ASSERT_TRUE(c.read_response()) << c.error();
    }

    executor kept() {
        std::lock_guard lock(mu_);
        return kept_;
    }

    std::mutex mu_;
    executor kept_;
};

TEST_P(executor_stop_test, post_after_stop_returns_false_and_drops_the_task) {
    keep_an_executor();
    srv().stop(); // stopped, not destroyed: the loops still exist
    const executor e = kept();
    ASSERT_TRUE(e);
    auto captured = std::make_shared<int>(1);
    std::weak_ptr<int> watch = captured;
    EXPECT_FALSE(e.post([captured] { ADD_FAILURE() << "a task ran after the loop stopped"; }));
    EXPECT_FALSE(e.post_after(milliseconds(1), [captured] { ADD_FAILURE() << "a timer ran after stop"; }));
    captured.reset();
    EXPECT_TRUE(watch.expired()) << "a refused task's captured state is still held";
    EXPECT_FALSE(e.in_loop_thread());
}

TEST_P(executor_stop_test, timer_pending_at_stop_is_destroyed_not_kept) {
    // The handler moves the only reference into the timer: after stop, nothing may hold it.
    auto slot = std::make_shared<std::shared_ptr<int>>(std::make_shared<int>(1));
    std::weak_ptr<int> watch = *slot;
    auto accepted = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/later", [slot, accepted](exchange& ex) {
        *accepted = ex.executor().post_after(
            milliseconds(60'000), [captured = std::move(*slot)] { ADD_FAILURE() << "a 60 s timer fired"; });
        ex.response().text("armed");
    });
    srv().start();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/later"))) << c.error();
        ASSERT_TRUE(c.read_response()) << c.error();
    }
    ASSERT_TRUE(accepted->load());
    EXPECT_FALSE(watch.expired());
    srv().stop();
    EXPECT_TRUE(watch.expired()) << "the stopped loop still holds a pending timer's function";
}

TEST_P(executor_stop_test, tasks_accepted_before_stop_run) {
    auto ran = std::make_shared<std::atomic<int>>(0);
    auto accepted = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/many", [ran, accepted](exchange& ex) {
        for (int i = 0; i < 100; ++i) {
            if (ex.executor().post([ran] { ++*ran; })) {
                ++*accepted;
            }
        }
        ex.response().text("posted");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/many"))) << c.error();
    ASSERT_TRUE(c.read_response()) << c.error();
    srv().stop();
    EXPECT_EQ(accepted->load(), 100);
    EXPECT_EQ(ran->load(), accepted->load());
}

SLUICE_BACKEND_SUITE(executor_stop_test);

} // namespace
} // namespace sluice::test
