// A runtime whose listener cannot start accepting (the driver refuses accept()) fails start()
// with a startup_error and frees everything in the right order: the listener, which holds a
// reference on its loop, goes before the loop (issue 6, defect 8: under ASan the old order was
// a heap-use-after-free in ~listener). The in-memory driver refuses accept() by design.
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "server/runtime.h"
#include "server/server_context.h"
#include "server/socket_util.h"

namespace sluice::testing {
namespace {

std::string can_run(const io::driver_options&) {
    return "";
}

std::unique_ptr<io::driver> make_fake(const io::driver_options&, std::string&) {
    return std::make_unique<fake_driver>();
}

const io::backend refusing_reactor{"refusing", io::traits{}, &can_run, &make_fake};
const io::backend refusing_blocking{"refusing", io::traits{.connection_per_thread = true}, &can_run,
                                    &make_fake};

struct start_harness {
    config cfg;
    router routes;
    logger log{log_level::error};
    detail::server_context ctx{cfg, routes, log};

    explicit start_harness(unsigned io_threads) {
        cfg.io_threads = io_threads;
        cfg.blocking.threads = 2;
    }
};

void expect_start_fails(detail::runtime& rt) {
    detail::listen_plan plan(1);
    plan[0].addr = detail::resolve_listen_address("127.0.0.1:0");
    try {
        rt.start(std::move(plan));
        ADD_FAILURE() << "start() succeeded with a driver that refuses accept()";
    } catch (const startup_error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot accept"), std::string::npos) << e.what();
    }
}

TEST(runtime_start_failure, reactor_with_one_loop) {
    start_harness h(1);
    auto rt = detail::make_reactor_runtime(refusing_reactor, h.ctx);
    expect_start_fails(*rt);
    rt.reset();
}

TEST(runtime_start_failure, reactor_with_two_loops) {
    start_harness h(2);
    auto rt = detail::make_reactor_runtime(refusing_reactor, h.ctx);
    expect_start_fails(*rt);
    EXPECT_EQ(rt->stats().connections_accepted, 0U);
    rt.reset();
}

TEST(runtime_start_failure, thread_per_connection) {
    start_harness h(1);
    auto rt = detail::make_thread_runtime(refusing_blocking, h.ctx);
    expect_start_fails(*rt);
    rt.reset();
}

// A connection thread's loop cannot open (each takes descriptors of its own: a few hundred
// threads under a low open-file limit run out): the startup error names blocking.threads,
// the setting to change, not "backend" (found by a black-box probe under prlimit --nofile).
std::unique_ptr<io::driver> fail_third_thread(const io::driver_options& o, std::string& error) {
    if (o.loop_index == 3) {
        error = "eventfd: Too many open files";
        return nullptr;
    }
    return std::make_unique<fake_driver>();
}
const io::backend short_of_descriptors{"short", io::traits{.connection_per_thread = true}, &can_run,
                                       &fail_third_thread};

TEST(runtime_start_failure, a_connection_thread_that_cannot_open_its_loop_names_blocking_threads) {
    start_harness h(1);
    h.cfg.blocking.threads = 4;
    auto rt = detail::make_thread_runtime(short_of_descriptors, h.ctx);
    detail::listen_plan plan(1);
    plan[0].addr = detail::resolve_listen_address("127.0.0.1:0");
    try {
        rt->start(std::move(plan));
        ADD_FAILURE() << "start() succeeded with a thread that cannot open its loop";
    } catch (const startup_error& e) {
        EXPECT_EQ(e.key(), "blocking.threads") << e.what();
        EXPECT_NE(std::string(e.what()).find("Too many open files"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("3 of 4"), std::string::npos) << e.what();
    }
    rt.reset();
}

} // namespace
} // namespace sluice::testing
