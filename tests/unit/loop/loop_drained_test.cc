// A stopping loop runs its on_drained() hooks once only background objects (a client pool's
// connections) keep it: after the server's connections have drained, not when the stop
// begins, so that an exchange in its drain can still finish its upstream call.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sluice/log.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

struct loop_drained_test : ::testing::Test {
    logger log{log_level::error};
    std::unique_ptr<detail::loop> l;
    std::vector<std::string> order;
    std::shared_ptr<int> owner = std::make_shared<int>(0); ///< what a hook belongs to (a pool)

    void SetUp() override {
        l = std::make_unique<detail::loop>(std::make_unique<testing::fake_driver>(), log, 0);
    }
};

TEST_F(loop_drained_test, drained_hooks_wait_for_the_foreground_and_then_end_the_background) {
    l->retain();            // a server connection in its drain
    l->retain_background(); // a pooled upstream connection its exchange uses
    l->on_stop([this] { order.emplace_back("stop"); });
    l->on_drained(owner, [this] {
        order.emplace_back("drained");
        l->release_background(); // the pool closes its connections
    });
    l->call_after(milliseconds(20), [this] {
        order.emplace_back("foreground done");
        l->release();
    });
    l->stop();
    l->run();
    EXPECT_EQ(order, (std::vector<std::string>{"stop", "foreground done", "drained"}));
    EXPECT_EQ(l->live(), 0U);
}

TEST_F(loop_drained_test, with_only_background_objects_the_drained_hooks_run_at_the_stop) {
    l->retain_background();
    l->on_drained(owner, [this] {
        order.emplace_back("drained");
        l->release_background();
    });
    l->stop();
    l->run();
    EXPECT_EQ(order, (std::vector<std::string>{"drained"}));
}

TEST_F(loop_drained_test, a_hook_registered_after_the_drain_runs_at_once) {
    l->retain_background(); // a pool's connection, closing once drained
    l->on_drained(owner, [this] {
        order.emplace_back("drained");
        l->call_after(milliseconds(1), [this] {
            // A client pool made on this loop after its drain (a call posted late): its hook
            // runs now, so its connection cannot keep the loop forever.
            l->retain_background();
            l->on_drained(owner, [this] {
                order.emplace_back("late drained");
                l->release_background();
            });
            l->release_background(); // the first connection's close completes
        });
    });
    l->stop();
    l->run();
    EXPECT_EQ(order, (std::vector<std::string>{"drained", "late drained"}));
    EXPECT_EQ(l->live(), 0U);
}

TEST_F(loop_drained_test, a_running_loop_with_only_background_objects_does_not_run_them) {
    l->retain_background();
    l->on_drained(owner, [this] { order.emplace_back("drained"); });
    l->call_after(milliseconds(5), [this] {
        order.emplace_back("tick");
        l->release_background();
    });
    l->run(detail::loop::run_mode::until_idle);
    EXPECT_EQ(order, (std::vector<std::string>{"tick"}));
}

TEST_F(loop_drained_test, a_hook_whose_owner_is_gone_neither_runs_nor_stays) {
    // A client made and destroyed while the server runs: its pool's hook must not keep what it
    // captured until the server stops, nor run on a pool that is gone.
    auto captured = std::make_shared<int>(0);
    for (int i = 0; i < 40; ++i) {
        auto gone = std::make_shared<int>(i);
        l->on_drained(gone, [this, captured] { order.emplace_back("gone"); });
    }
    EXPECT_LT(captured.use_count(), 1 + 40) << "the hooks of owners gone are dropped as others come";
    l->on_drained(owner, [this] { order.emplace_back("alive"); });
    l->stop();
    l->run();
    EXPECT_EQ(order, (std::vector<std::string>{"alive"}));
    EXPECT_EQ(captured.use_count(), 1);
}

} // namespace
} // namespace sluice::detail
