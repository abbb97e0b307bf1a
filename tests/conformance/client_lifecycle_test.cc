// sluice::client without a server, on its own loop: the cancel handle, the blocking call,
// connect timeout, idle timeout and connection lifetime, destruction with calls in flight.
// And the blocking style from a sync handler on every backend.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <sluice/client.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

/// The outcome of a callback-style call, for the test thread.
struct outcome_box {
    std::promise<result<client_response>> p;
    std::future<result<client_response>> f = p.get_future();
    client_callback callback() {
        return [this](result<client_response> r) { p.set_value(std::move(r)); };
    }
    std::optional<result<client_response>> get(std::chrono::milliseconds timeout = default_timeout) {
        if (f.wait_for(timeout) != std::future_status::ready) {
            return std::nullopt;
        }
        return f.get();
    }
};

TEST(client_own_loop, blocking_call_and_callback_without_an_executor) {
    fake_upstream up(answer_all);
    client cl(upstream({up.address()}));
    auto r = cl.send_blocking({.target = "/a"});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "ok");
    outcome_box box;
    cl.send(executor{}, {.target = "/b"}, box.callback());
    auto r2 = box.get();
    ASSERT_TRUE(r2);
    ASSERT_TRUE(*r2) << r2->error().message();
    EXPECT_EQ(up.accepted(), 1); // one pooled connection for both
}

TEST(client_own_loop, cancel_closes_the_upstream_connection) {
    std::atomic<bool> saw_close{false};
    fake_upstream up([&](upstream_conn& c) {
        if (c.read_request()) {
            saw_close = c.wait_closed(5s);
        }
    });
    client cl(upstream({up.address()}));
    outcome_box box;
    client_call call = cl.send(executor{}, {.target = "/hold"}, box.callback());
    ASSERT_TRUE(wait_until([&] { return up.accepted() == 1; }));
    ASSERT_TRUE(wait_until([&] { return cl.stats().open == 1; }));
    EXPECT_TRUE(call.cancel());
    auto r = box.get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error(), client_errc::cancelled);
    EXPECT_TRUE(wait_until([&] { return saw_close.load(); }));
    EXPECT_TRUE(wait_until([&] { return cl.stats().open == 0; }));
    EXPECT_FALSE(call.cancel()) << "a second cancel is a no-op";
}

TEST(client_own_loop, connect_timed_out_when_the_backlog_is_full) {
    // A listener that never accepts, its backlog filled: further SYNs are dropped
    // (net.ipv4.tcp_abort_on_overflow = 0, the default), so a connect hangs.
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(lfd, 0), 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    std::vector<int> fillers;
    for (int i = 0; i < 4; ++i) {
        const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        (void)::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
        fillers.push_back(f);
    }
    {
        client cl(upstream({"127.0.0.1:" + std::to_string(ntohs(a.sin_port))}), {.connect_timeout = 200ms});
        const auto t0 = test_clock::now();
        auto r = cl.send_blocking({.target = "/"});
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), client_errc::connect_timed_out) << r.error().message();
        EXPECT_LT(test_clock::now() - t0, 2s);
    }
    for (int f : fillers) {
        ::close(f);
    }
    ::close(lfd);
}

TEST(client_own_loop, idle_connections_close_after_idle_timeout) {
    std::atomic<int> closed_by_client{0};
    fake_upstream up([&](upstream_conn& c) {
        answer_all(c); // returns at EOF: the client closed
        ++closed_by_client;
    });
    client cl(upstream({up.address()}), {.idle_timeout = 100ms});
    ASSERT_TRUE(cl.send_blocking({.target = "/"}));
    EXPECT_EQ(cl.stats().open, 1u);
    EXPECT_TRUE(wait_until([&] { return closed_by_client.load() == 1; }, 3s));
    EXPECT_TRUE(wait_until([&] { return cl.stats().open == 0; }));
}

TEST(client_own_loop, old_connections_are_retired) {
    fake_upstream up(answer_all);
    client cl(upstream({up.address()}), {.max_connection_lifetime = 50ms});
    ASSERT_TRUE(cl.send_blocking({.target = "/"}));
    std::this_thread::sleep_for(80ms); // the connection's lifetime passes (not synchronisation)
    ASSERT_TRUE(cl.send_blocking({.target = "/"}));
    EXPECT_EQ(up.accepted(), 2);
}

TEST(client_own_loop, destruction_cancels_calls_in_flight) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.wait_closed(5s);
        }
    });
    auto box = std::make_shared<outcome_box>();
    {
        client cl(upstream({up.address()}));
        cl.send(executor{}, {.target = "/hold"}, box->callback());
        ASSERT_TRUE(wait_until([&] { return up.accepted() == 1; }));
    }
    // The callback was posted to the client's own loop, which ran it before ending.
    auto r = box->get(1s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->error(), client_errc::cancelled);
    EXPECT_TRUE(wait_until([&] { return up.closed() == 1; }));
}

TEST(client_own_loop, invalid_request_is_refused_before_connecting) {
    fake_upstream up(answer_all);
    client cl(upstream({up.address()}));
    auto r = cl.send_blocking({.target = "/", .headers = {{"X", "a\r\nInjected: yes"}}});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), client_errc::invalid_request);
    EXPECT_EQ(up.accepted(), 0);
}

TEST(client_own_loop, bad_addresses_are_refused_at_construction) {
    EXPECT_THROW(upstream({}), std::invalid_argument);
    EXPECT_THROW(upstream({"no-port"}), std::invalid_argument);
    EXPECT_THROW(upstream({"127.0.0.1:99999"}), std::invalid_argument);
    EXPECT_THROW(upstream({"[::1"}), std::invalid_argument);
    EXPECT_NO_THROW(upstream({"127.0.0.1:1", "[::1]:2", "localhost:3"}));
}

TEST(client_own_loop, against_a_sluice_upstream) {
    test_server up("epoll", dispatch_mode::inline_io);
    up.route("GET", "/text", [](exchange& ex) { ex.response().text("from sluice"); });
    up.route("HEAD", "/text", [](exchange& ex) { ex.response().text("from sluice"); });
    up.route("POST", "/echo", [](exchange& ex) { ex.response().text(std::string(ex.request().body())); });
    up.start();
    client cl(upstream({"127.0.0.1:" + std::to_string(up.port())}));
    auto r = cl.send_blocking({.target = "/text"});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "from sluice");
    auto h = cl.send_blocking({.method = "HEAD", .target = "/text"});
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(h->body, "");
    EXPECT_EQ(h->header("content-length"), "11");
    const std::string big(200'000, 'b');
    auto p = cl.send_blocking({.method = "POST", .target = "/echo", .body = big});
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(p->body, big);
    auto missing = cl.send_blocking({.target = "/nope"});
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    EXPECT_EQ(cl.stats().connects, 1u) << "every response kept the connection";
    up.stop();
}

class client_sync_test : public backend_test {};

TEST_P(client_sync_test, blocking_call_from_a_sync_handler) {
    fake_upstream up(answer_all);
    client cl(upstream({up.address()}));
    srv().route("GET", "/sync", [&cl](exchange& ex) {
        auto r = cl.send_blocking({.target = "/x"});
        ex.response().status(r ? 200 : 502).text(r ? r->body : r.error().message());
    });
    srv().start();
    test_client c(srv().port());
    for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(c.send(get_request("/sync"))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "ok");
    }
    srv().stop();
}

TEST_P(client_sync_test, a_destroyed_client_frees_what_it_had_on_the_server_loops) {
    // A client made and dropped while the server runs (one per configuration, or per request)
    // must not leave its pool on the loop it called from: the pool holds the upstream's state,
    // its options and TLS context. The loop's drain hook once held it until the server stopped.
    fake_upstream up(answer_all);
    const upstream target({up.address()});
    auto cl = std::make_unique<client>(target);
    std::mutex mu;
    srv().route("GET", "/a", [&](exchange& ex) {
        auto ctx = ex.start_async(5s);
        std::lock_guard lock(mu);
        cl->send(ex.executor(), {.target = "/x"}, [ctx](result<client_response> r) mutable {
            ctx.complete(response(r ? 200 : 502).text(r ? r->body : r.error().message()));
        });
    });
    srv().start();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/a"))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->body, "ok");
    }
    EXPECT_GT(target.state().use_count(), 1);
    {
        std::lock_guard lock(mu);
        cl.reset();
    }
    EXPECT_TRUE(wait_until([&] { return target.state().use_count() == 1; }))
        << target.state().use_count() - 1 << " other owners of the upstream's state remain";
    srv().stop();
}

SLUICE_BACKEND_SUITE(client_sync_test);

} // namespace
} // namespace sluice::test
