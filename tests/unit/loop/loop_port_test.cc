// The loop's mailbox: a post from another thread wakes a waiting loop; a post from the loop's
// own thread needs no wake-up (the loop is not waiting, and looks at the mailbox before it
// waits again), so it costs no eventfd write and no extra wake-up of the next wait.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include <sluice/log.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::detail {
namespace {

struct loop_port_test : ::testing::Test {
    logger log{log_level::error};
    testing::fake_driver* driver = nullptr;
    std::unique_ptr<detail::loop> l;

    void SetUp() override {
        auto d = std::make_unique<testing::fake_driver>();
        driver = d.get();
        l = std::make_unique<detail::loop>(std::move(d), log, 0);
    }
};

TEST_F(loop_port_test, a_post_from_another_thread_wakes_the_loop) {
    l->port().set_owner_thread(std::this_thread::get_id()); // as run() does
    bool ran = false;
    std::thread([&] { EXPECT_TRUE(l->port().post([&ran] { ran = true; })); }).join();
    EXPECT_EQ(driver->wakes.load(), 1U);
    l->run(detail::loop::run_mode::until_idle);
    EXPECT_TRUE(ran);
}

TEST_F(loop_port_test, a_post_from_the_loop_thread_does_not_wake_and_is_not_waited_for) {
    // A timer on the loop posts a task, as a loop timer that completes an exchange does; the
    // task stops the loop. Until then the loop keeps iterating (one object is live).
    bool ran = false;
    std::chrono::nanoseconds timeout_after_post{-2};
    l->retain();
    l->call_after(std::chrono::milliseconds(0), [&] {
        ASSERT_TRUE(l->port().post([&] {
            ran = true;
            timeout_after_post = driver->last_timeout;
            l->release();
            l->stop();
        }));
    });
    const std::size_t wakes_before = driver->wakes.load();
    l->run();
    EXPECT_TRUE(ran);
    // stop() posts from the loop thread too: neither post woke the driver.
    EXPECT_EQ(driver->wakes.load(), wakes_before);
    // The wait between the post and the task did not block: it was asked for a zero timeout.
    EXPECT_EQ(timeout_after_post, std::chrono::nanoseconds(0));
}

} // namespace
} // namespace sluice::detail
