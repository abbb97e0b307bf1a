// A thread that cannot start (the process is at ulimit -u, or ulimit -v leaves no room for a
// stack: `--dispatch pool --worker-threads 4096`) is a startup error naming the key that asked
// for the threads, after the threads already started are stopped and joined. Before, the
// worker pool's vector destroyed joinable threads (std::terminate, SIGABRT), and the runtimes
// let std::system_error out with nothing but "Resource temporarily unavailable". The failure
// is injected with server_context::refuse_thread: the n-th start and every later one fail.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include <sluice/sluice.h>

#include "config_test_helpers.h"
#include "server/runtime.h"
#include "server/server_context.h"
#include "server/socket_util.h"
#include "server/worker_pool.h"
#include "support/backend_matrix.h"

namespace sluice::test {
namespace {

struct thread_harness {
    config cfg;
    router routes;
    logger log{log_level::error};
    detail::server_context ctx{cfg, routes, log};
    std::atomic<int> started{0};

    // Threads [0, allowed) start; the next one fails.
    explicit thread_harness(int allowed) {
        ctx.refuse_thread = [this, allowed] { return started.fetch_add(1) >= allowed; };
    }
};

void expect_names(const startup_error& e, const std::string& key, const std::string& which) {
    EXPECT_EQ(e.key(), key) << e.what();
    EXPECT_NE(std::string(e.what()).find(which), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Resource temporarily unavailable"), std::string::npos) << e.what();
}

detail::listen_plan loopback_plan() {
    detail::listen_plan plan(1);
    plan[0].addr = detail::resolve_listen_address("127.0.0.1:0");
    return plan;
}

TEST(thread_start_failure, worker_pool_stops_the_threads_it_started) {
    thread_harness h(3);
    const auto e = testing::catch_startup_error([&] { detail::worker_pool pool(8, &h.ctx); });
    expect_names(e, "worker_threads", "cannot start thread 4 of 8");
}

TEST(thread_start_failure, worker_pool_whose_first_thread_fails) {
    thread_harness h(0);
    expect_names(testing::catch_startup_error([&] { detail::worker_pool pool(2, &h.ctx); }), "worker_threads",
                 "cannot start thread 1 of 2");
}

TEST(thread_start_failure, reactor_stops_the_loops_it_started) {
    const io::backend* b = find_backend("epoll");
    ASSERT_NE(b, nullptr);
    thread_harness h(2);
    h.cfg.io_threads = 4;
    auto rt = detail::make_reactor_runtime(*b, h.ctx);
    expect_names(testing::catch_startup_error([&] { rt->start(loopback_plan()); }), "io_threads",
                 "cannot start thread 3 of 4");
    EXPECT_TRUE(rt->listening_sockets().empty());
    rt.reset();
}

TEST(thread_start_failure, thread_runtime_stops_the_workers_it_started) {
    const io::backend* b = find_backend("blocking");
    ASSERT_NE(b, nullptr);
    thread_harness h(1);
    h.cfg.blocking.threads = 3;
    auto rt = detail::make_thread_runtime(*b, h.ctx);
    expect_names(testing::catch_startup_error([&] { rt->start(loopback_plan()); }), "blocking.threads",
                 "cannot start thread 2 of 4");
    rt.reset();
}

TEST(thread_start_failure, thread_runtime_whose_acceptor_fails) {
    const io::backend* b = find_backend("blocking");
    ASSERT_NE(b, nullptr);
    thread_harness h(3); // the three connection threads start, the acceptor does not
    h.cfg.blocking.threads = 3;
    auto rt = detail::make_thread_runtime(*b, h.ctx);
    expect_names(testing::catch_startup_error([&] { rt->start(loopback_plan()); }), "blocking.threads",
                 "cannot start thread 4 of 4");
    rt.reset();
}

} // namespace
} // namespace sluice::test
