// server::stop() is idempotent and callable from the server's own threads (server.h): a
// second stop() from a handler, an async listener, a loop task or a pool worker while a stop
// is in progress must return at once instead of waiting for the threads it runs on to end
// (issue 6, defect 1). Every case checks that the calls returned and that server::wait()
// returns within a deadline; a deadlocked server fails here (and test_server aborts the run
// at TearDown rather than hang the suite).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class repeated_stop_test : public backend_test {
protected:
    /// Starts a thread in server::wait(); the flag turns true when it returns.
    std::shared_ptr<std::atomic<bool>> watch_wait() {
        auto waited = std::make_shared<std::atomic<bool>>(false);
        bg_.run([this, waited] {
            srv().server().wait();
            *waited = true;
        });
        return waited;
    }

    /// Calls stop() twice and counts the calls that returned.
    // Starts the server, requests `path` (whose handler ends in stop_twice()), and expects both
    // stop() calls and server::wait() to return.
    void expect_both_stops_return(const char* path) {
        srv().start();
        auto waited = watch_wait();
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request(path))) << c.error();
        EXPECT_TRUE(wait_until([&] { return returned_.load() == 2; }))
            << returned_.load() << " of 2 stop() returned";
        EXPECT_TRUE(wait_until([&] { return waited->load(); })) << "server::wait() did not return";
    }

    void stop_twice() {
        srv().server().stop();
        ++returned_;
        srv().server().stop();
        ++returned_;
    }

    std::atomic<int> returned_{0};
};

TEST_P(repeated_stop_test, handler_calls_stop_twice) {
    srv().route("GET", "/quit", [this](exchange& ex) {
        stop_twice();
        ex.response().text("bye");
    });
    srv().start();
    auto waited = watch_wait();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/quit"))) << c.error();
    EXPECT_TRUE(wait_until([&] { return returned_.load() == 2; }))
        << returned_.load() << " of 2 stop() returned";
    EXPECT_TRUE(wait_until([&] { return waited->load(); })) << "server::wait() did not return";
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "bye");
}

TEST_P(repeated_stop_test, two_handlers_call_stop_concurrently) {
    // Each handler waits (bounded) for the other, so that where two handlers can run at once
    // (blocking threads, a worker pool) both stops overlap; one inline loop runs them in turn.
    auto arrived = std::make_shared<std::atomic<int>>(0);
    srv().route("GET", "/quit", [this, arrived](exchange& ex) {
        ++*arrived;
        (void)wait_until([&] { return arrived->load() >= 2; }, milliseconds(500));
        srv().server().stop();
        ++returned_;
        ex.response().text("bye");
    });
    srv().start();
    auto waited = watch_wait();
    test_client a(srv().port());
    test_client b(srv().port());
    ASSERT_TRUE(a.send(get_request("/quit"))) << a.error();
    ASSERT_TRUE(b.send(get_request("/quit"))) << b.error();
    EXPECT_TRUE(wait_until([&] { return waited->load(); })) << "server::wait() did not return";
    // The second request may have been refused by the first stop; whatever ran returned.
    EXPECT_TRUE(wait_until([&] { return returned_.load() == arrived->load(); }))
        << returned_.load() << " of " << arrived->load() << " stop() returned";
    EXPECT_GE(arrived->load(), 1);
}

TEST_P(repeated_stop_test, on_complete_listener_calls_stop_twice) {
    srv().route("GET", "/async", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(20'000));
        ctx.on_complete([this](const async_event&) { stop_twice(); });
        bg_.run([ctx]() mutable { ctx.complete(response(200).text("done")); });
    });
    expect_both_stops_return("/async");
}

TEST_P(repeated_stop_test, loop_task_calls_stop_twice) {
    srv().route("GET", "/task", [this](exchange& ex) {
        ex.response().text("posted");
        EXPECT_TRUE(ex.executor().post([this] { stop_twice(); }));
    });
    expect_both_stops_return("/task");
}

TEST_P(repeated_stop_test, handler_stop_then_outside_stop_waits_for_the_end) {
    auto release = std::make_shared<std::atomic<bool>>(false);
    srv().route("GET", "/quit", [this, release](exchange& ex) {
        srv().server().stop();
        ++returned_;
        // Hold the server thread a little, so the outside stop() below arrives mid-stop.
        (void)wait_until([&] { return release->load(); }, milliseconds(2000));
        srv().server().stop();
        ++returned_;
        ex.response().text("bye");
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/quit"))) << c.error();
    ASSERT_TRUE(wait_until([&] { return returned_.load() == 1; }));
    auto outside = std::make_shared<std::atomic<bool>>(false);
    bg_.run([this, outside] {
        srv().server().stop();
        *outside = true;
    });
    std::this_thread::sleep_for(milliseconds(50)); // not synchronisation: only lets the call begin
    *release = true;
    EXPECT_TRUE(wait_until([&] { return outside->load(); })) << "the outside stop() did not return";
    EXPECT_EQ(returned_.load(), 2);
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "bye");
}

SLUICE_BACKEND_SUITE(repeated_stop_test);

} // namespace
} // namespace sluice::test
