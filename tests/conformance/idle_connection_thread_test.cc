// The blocking backend's connection threads between connections: each runs a loop over one
// connection at a time, and a handler's executor names that loop. Work handed to it after the
// connection closed (a post, a timer, a limiter's permit granted to a callback) must run then,
// not wait for the thread's next connection, which may never come: a permit held by a callback
// nobody runs is lost to everyone else.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <sluice/exchange.h>
#include <sluice/executor.h>
#include <sluice/limiter.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// Far less than any wait the bug causes (forever, until a next connection), far more than a
// post takes on a loaded machine.
constexpr milliseconds run_within{3'000};

class idle_connection_thread_test : public backend_test {
protected:
    /// One connection thread (of `threads`) serves a request that keeps its executor; the
    /// client leaves and the thread goes idle. Returns that executor.
    executor idle_thread_executor(std::uint32_t threads = 1) {
        srv().config().blocking.threads = threads;
        srv().route("GET", "/", [this](exchange& ex) {
            {
                std::lock_guard lock(mu_);
                saved_ = ex.executor();
            }
            ex.response().text("ok");
        });
        srv().start();
        {
            test_client c(srv().port());
            EXPECT_TRUE(c.send(get_request("/"))) << c.error();
            auto r = c.read_response();
            EXPECT_TRUE(r) << c.error();
            c.close_clean();
        }
        EXPECT_TRUE(wait_until([&] { return srv().stats().connections_open == 0; }))
            << "connections_open = " << srv().stats().connections_open;
        std::lock_guard lock(mu_);
        return saved_.value_or(executor());
    }

    std::mutex mu_;
    std::optional<executor> saved_;
};

TEST_P(idle_connection_thread_test, a_task_posted_while_it_waits_for_a_connection_runs_at_once) {
    const executor ex = idle_thread_executor();
    auto ran = std::make_shared<std::atomic<bool>>(false);
    ASSERT_TRUE(ex.post([ran] { ran->store(true); }));
    EXPECT_TRUE(wait_until([&] { return ran->load(); }, run_within))
        << "the task waits for a next connection";
}

TEST_P(idle_connection_thread_test, a_timer_set_while_it_waits_for_a_connection_fires) {
    const executor ex = idle_thread_executor();
    auto ran = std::make_shared<std::atomic<bool>>(false);
    ASSERT_TRUE(ex.post_after(milliseconds(50), [ran] { ran->store(true); }));
    EXPECT_TRUE(wait_until([&] { return ran->load(); }, run_within))
        << "the timer waits for a next connection";
}

TEST_P(idle_connection_thread_test, a_permit_granted_to_a_callback_there_is_not_lost) {
    const executor ex = idle_thread_executor();
    limiter lim(limiter_options{.permits = 1, .max_queue = 1, .wait_timeout = std::chrono::seconds(60)});
    permit held = lim.try_acquire();
    ASSERT_TRUE(held);
    auto ran = std::make_shared<std::atomic<bool>>(false);
    lim.acquire(ex, [ran](std::error_code ec, permit p) {
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_TRUE(p);
        ran->store(true); // the permit is released as p goes
    });
    held = permit(); // hands the permit to the waiting callback, posted to the idle thread
    EXPECT_TRUE(wait_until([&] { return ran->load(); }, run_within))
        << "the callback waits for a next connection";
    EXPECT_TRUE(wait_until([&] { return static_cast<bool>(lim.try_acquire()); }, run_within))
        << "the permit is still held: in_use = " << lim.stats().in_use;
}

TEST_P(idle_connection_thread_test, a_connection_goes_to_a_waiting_thread_not_one_running_a_task) {
    // The thread that served the last connection runs a long task handed to its loop; the next
    // connection must not wait for that task while another thread waits for work.
    const executor ex = idle_thread_executor(2);
    auto started = std::make_shared<std::atomic<bool>>(false);
    ASSERT_TRUE(ex.post([started] {
        started->store(true);
        std::this_thread::sleep_for(milliseconds(3'000));
    }));
    ASSERT_TRUE(wait_until([&] { return started->load(); }, run_within));
    const auto from = test_clock::now();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "ok");
    EXPECT_LT(test_clock::now() - from, milliseconds(1'500)) << "the connection waited for the task";
}

SLUICE_BACKEND_SUITE_OF(idle_connection_thread_test, "blocking");

} // namespace
} // namespace sluice::test
