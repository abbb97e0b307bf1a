// Listeners run even when copying one would fail, on every backend × dispatch mode. Running
// the listeners of an event must not need memory: on_complete is what releases a limiter's
// permit and a coroutine's runner, and it must fire exactly once also when an allocation
// fails. A listener whose copy throws std::bad_alloc stands for the out-of-memory case
// (copying a std::function allocates when its target is not small): if the core copied the
// listeners to run them, every listener of that event would be skipped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <utility>

#include <sluice/coro.h>
#include <sluice/exchange.h>
#include <sluice/limiter.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

/// A listener that counts its runs and cannot be copied without "running out of memory".
struct copy_fails {
    explicit copy_fails(std::shared_ptr<std::atomic<int>> r) noexcept : runs(std::move(r)) {}
    copy_fails(copy_fails&&) noexcept = default;
    copy_fails(const copy_fails& /*other*/) { throw std::bad_alloc(); }
    copy_fails& operator=(const copy_fails&) = delete;
    copy_fails& operator=(copy_fails&&) = delete;
    ~copy_fails() = default;
    void operator()(const async_event& /*ev*/) const { ++*runs; }
    std::shared_ptr<std::atomic<int>> runs;
};

class async_listener_oom_test : public backend_test {
protected:
    std::shared_ptr<std::atomic<int>> uncopyable_runs_ = std::make_shared<std::atomic<int>>(0);
    std::shared_ptr<std::atomic<int>> plain_runs_ = std::make_shared<std::atomic<int>>(0);

    /// Registers an uncopyable and a plain on_complete listener on ctx.
    void add_complete_listeners(async_context& ctx) {
        EXPECT_TRUE(ctx.on_complete(copy_fails(uncopyable_runs_)));
        EXPECT_TRUE(ctx.on_complete([runs = plain_runs_](const async_event&) { ++*runs; }));
    }

    void expect_each_ran_once_and_the_permit_came_back(const limiter& lim) {
        EXPECT_TRUE(wait_until([&] { return lim.stats().in_use == 0; }))
            << "the limiter's on_complete was skipped: its permit is held";
        EXPECT_TRUE(wait_until([&] { return plain_runs_->load() == 1 && uncopyable_runs_->load() == 1; }))
            << "plain " << plain_runs_->load() << ", uncopyable " << uncopyable_runs_->load();
        EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
        EXPECT_EQ(plain_runs_->load(), 1);
        EXPECT_EQ(uncopyable_runs_->load(), 1);
    }
};

TEST_P(async_listener_oom_test, on_complete_runs_once_for_an_async_exchange_behind_a_limiter) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    srv().route("GET", "/a", limited(lim, [this](exchange& ex) {
                    auto ctx = ex.start_async();
                    add_complete_listeners(ctx);
                    EXPECT_TRUE(
                        ex.executor().post([ctx]() mutable { ctx.complete(response(200).text("done")); }));
                }));
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/a"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    expect_each_ran_once_and_the_permit_came_back(lim);
}

TEST_P(async_listener_oom_test, on_complete_runs_once_for_a_coroutine_behind_a_limiter) {
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(0)});
    srv().route("GET", "/co", limited(lim, coroutine_handler([this](exchange& ex) -> task<> {
                                          auto ctx = ex.context();
                                          add_complete_listeners(ctx);
                                          if (!co_await sleep_for(ex, milliseconds(20))) {
                                              ex.response().text("slept");
                                          }
                                      })));
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "slept");
    expect_each_ran_once_and_the_permit_came_back(lim);
}

TEST_P(async_listener_oom_test, on_timeout_and_on_error_run_too) {
    auto timeouts = std::make_shared<std::atomic<int>>(0);
    auto errors = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/t", [this, timeouts](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(100));
        EXPECT_TRUE(ctx.on_timeout(copy_fails(timeouts)));
        EXPECT_TRUE(ctx.on_timeout([](const async_event& ev) {
            async_context c = ev.context;
            c.complete(response(200).text("answered by on_timeout"));
        }));
        add_complete_listeners(ctx);
    });
    srv().route("GET", "/e", [this, errors](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(10'000));
        EXPECT_TRUE(ctx.on_error(copy_fails(errors)));
        contexts_.add(ctx);
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/t"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 200) << "the on_timeout listeners were skipped";
    EXPECT_EQ(r->body, "answered by on_timeout");
    EXPECT_EQ(timeouts->load(), 1);
    EXPECT_TRUE(wait_until([&] { return plain_runs_->load() == 1 && uncopyable_runs_->load() == 1; }));

    test_client leaving(srv().port());
    ASSERT_TRUE(leaving.send(get_request("/e"))) << leaving.error();
    ASSERT_TRUE(contexts_.wait_for(1));
    ASSERT_TRUE(srv().wait_suspended(1));
    leaving.close_abortive();
    EXPECT_TRUE(wait_until([&] { return errors->load() == 1; })) << "the on_error listener was skipped";
    EXPECT_TRUE(srv().wait_exchanges_freed()) << "exchanges_live = " << srv().stats().exchanges_live;
    EXPECT_EQ(errors->load(), 1);
}

SLUICE_BACKEND_SUITE(async_listener_oom_test);

} // namespace
} // namespace sluice::test
