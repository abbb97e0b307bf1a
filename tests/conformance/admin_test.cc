// The admin listener on every backend × dispatch mode: /metrics counts exactly the requests
// made (by route template, method and status class), /healthz, and /readyz through start,
// a saturated limiter and a drain.
#include <gtest/gtest.h>

#include <charconv>
#include <optional>
#include <string>

#include <sluice/client.h>
#include <sluice/exchange.h>
#include <sluice/limiter.h>

#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// The value of the sample whose name and labels are exactly `series`, or nullopt.
std::optional<double> sample_value(const std::string& text, const std::string& series) {
    const std::string key = "\n" + series + " ";
    const auto at = ("\n" + text).find(key);
    if (at == std::string::npos) {
        return std::nullopt;
    }
    const auto start = at + key.size() - 1; // the "\n" added in front shifts by one
    const auto end = text.find('\n', start);
    return std::stod(text.substr(start, end - start));
}

class admin_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        srv().config().admin.listen = "127.0.0.1:0";
        srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
        srv().route("GET", "/items/{id}", [](exchange& ex) { ex.response().text("item"); });
        srv().route("POST", "/items/{id}", [](exchange& ex) { ex.response().status(201).text("made"); });
        srv().route("GET", "/hold",
                    [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(20'000))); });
    }

    std::optional<http_response> admin_get(std::string_view target) {
        test_client c(srv().server().admin_port());
        if (!c.send(get_request(target, "Connection: close\r\n"))) {
            return std::nullopt;
        }
        return c.read_response();
    }

    std::string metrics() {
        auto r = admin_get("/metrics");
        EXPECT_TRUE(r.has_value());
        return r ? r->body : std::string();
    }
};

TEST_P(admin_test, metrics_count_exactly_the_requests_made) {
    srv().start();
    ASSERT_NE(srv().server().admin_port(), 0);
    ASSERT_NE(srv().server().admin_port(), srv().port());
    test_client c(srv().port());
    auto exchange_one = [&](std::string request, int status) {
        ASSERT_TRUE(c.send(request)) << c.error();
        auto r = c.read_response(request.starts_with("HEAD") ? body_rule::head_request : body_rule::normal);
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, status);
    };
    for (int i = 0; i < 7; ++i) {
        exchange_one(get_request("/"), 200);
    }
    for (int i = 0; i < 3; ++i) {
        exchange_one(get_request("/items/" + std::to_string(i)), 200);
    }
    for (int i = 0; i < 2; ++i) {
        exchange_one("POST /items/9 HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx", 201);
    }
    exchange_one(get_request("/nope"), 404);
    exchange_one("HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", 200);

    auto r = admin_get("/metrics");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    const std::string& m = r->body;
    EXPECT_EQ(sample_value(m, R"m(sluice_http_requests_total{route="/",method="GET",code_class="2xx"})m"), 7);
    EXPECT_EQ(sample_value(m, R"m(sluice_http_requests_total{route="/",method="HEAD",code_class="2xx"})m"),
              1);
    EXPECT_EQ(
        sample_value(m, R"m(sluice_http_requests_total{route="/items/{id}",method="GET",code_class="2xx"})m"),
        3);
    EXPECT_EQ(sample_value(
                  m, R"m(sluice_http_requests_total{route="/items/{id}",method="POST",code_class="2xx"})m"),
              2);
    EXPECT_EQ(
        sample_value(m, R"m(sluice_http_requests_total{route="(unmatched)",method="GET",code_class="4xx"})m"),
        1);
    EXPECT_EQ(sample_value(m, R"m(sluice_http_request_duration_seconds_count{route="/"})m"), 8);
    EXPECT_EQ(sample_value(m, R"m(sluice_http_request_duration_seconds_bucket{route="/",le="+Inf"})m"), 8);
    EXPECT_EQ(sample_value(m, R"m(sluice_http_request_duration_seconds_count{route="/items/{id}"})m"), 5);
    EXPECT_EQ(sample_value(m, "sluice_connections_accepted_total"), 1);
    EXPECT_EQ(sample_value(m, "sluice_connections_open"), 1);
    EXPECT_EQ(sample_value(m, "sluice_http_requests_in_flight"), 0);
    EXPECT_EQ(sample_value(m, "sluice_ready"), 1);
    EXPECT_GT(sample_value(m, "process_resident_memory_bytes").value_or(0), 0);
    EXPECT_GT(sample_value(m, "process_threads").value_or(0), 1);
    // The admin listener's own requests are not the server's.
    EXPECT_EQ(m.find("/metrics"), std::string::npos);
}

TEST_P(admin_test, watched_clients_show_pool_figures_and_failures_by_kind) {
    fake_upstream up([](upstream_conn& c) {
        while (c.read_request()) {
            if (!c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) {
                return;
            }
        }
    });
    client api(upstream({up.address()}));
    // A port nothing listens on: the listener is closed before the first call.
    std::optional<client> down;
    {
        fake_upstream gone([](upstream_conn&) {});
        down.emplace(upstream({gone.address()}));
    }
    for (auto [path, cl] : {std::pair{"/api", &api}, std::pair{"/down", &*down}}) {
        srv().route("GET", path, [cl](exchange& ex) {
            auto ctx = ex.start_async(milliseconds(10'000));
            cl->send(ex.executor(), {.target = "/"}, [ctx](result<client_response> r) mutable {
                response res;
                res.status(r ? 200 : 502).text(r ? r->body : r.error().message());
                ctx.complete(std::move(res));
            });
        });
    }
    srv().before_start([&](sluice::server& s) {
        s.watch("api", [&api] { return api.stats(); });
        s.watch("down", [&down] { return down->stats(); });
    });
    srv().start();
    test_client c(srv().port());
    for (const char* path : {"/api", "/down", "/down"}) {
        ASSERT_TRUE(c.send(get_request(path))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->status, std::string_view(path) == "/api" ? 200 : 502) << path << " " << r->body;
    }
    // The connection goes back to the pool just after the answer is handed over.
    ASSERT_TRUE(wait_until([&] { return api.stats().idle == 1; }));
    const std::string m = metrics();
    EXPECT_EQ(sample_value(m, R"m(sluice_client_connections_idle{upstream="api"})m"), 1);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_connections_open{upstream="api"})m"), 1);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_calls_pending{upstream="api"})m"), 0);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_failures_total{upstream="api",kind="refused"})m"), 0);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_failures_total{upstream="down",kind="refused"})m"), 2);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_failures_total{upstream="down",kind="reset"})m"), 0);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_failed_total{upstream="down"})m"), 2);
    EXPECT_EQ(sample_value(m, R"m(sluice_client_connections_idle{upstream="down"})m"), 0);
    srv().stop(); // before the clients its handlers and watch functions use
}

TEST_P(admin_test, suspended_requests_and_async_timeouts_are_counted) {
    srv().route("GET", "/short", [](exchange& ex) { ex.start_async(milliseconds(50)); });
    srv().start();
    test_client held(srv().port());
    ASSERT_TRUE(held.send(get_request("/hold")));
    ASSERT_TRUE(contexts_.wait_for(1));
    ASSERT_TRUE(srv().wait_suspended(1));
    std::string m = metrics();
    EXPECT_EQ(sample_value(m, "sluice_http_requests_suspended"), 1);
    EXPECT_EQ(sample_value(m, "sluice_http_requests_in_flight"), 1);

    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/short")));
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->status, 503);
    m = metrics();
    EXPECT_EQ(sample_value(m, "sluice_async_timeouts_total"), 1);
    EXPECT_EQ(
        sample_value(m, R"m(sluice_http_requests_total{route="/short",method="GET",code_class="5xx"})m"), 1);
    contexts_.at(0).complete();
    auto h = held.read_response();
    ASSERT_TRUE(h) << held.error();
}

TEST_P(admin_test, healthz_and_readyz) {
    srv().start();
    auto h = admin_get("/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    auto r = admin_get("/readyz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "ready\n");
    EXPECT_TRUE(srv().server().ready());
}

TEST_P(admin_test, readyz_is_503_while_a_watched_limiter_is_saturated) {
    if (connection_per_thread() && srv().config().blocking.threads < 3) {
        srv().config().blocking.threads = 4;
    }
    limiter lim({.permits = 1, .max_queue = 0, .wait_timeout = milliseconds(1000)});
    srv().route("GET", "/limited",
                limited(lim, [this](exchange& ex) { contexts_.add(ex.start_async(milliseconds(20'000))); }));
    srv().before_start([&lim](sluice::server& s) { s.watch("uploads", lim); });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/limited")));
    ASSERT_TRUE(contexts_.wait_for(1));
    auto r = admin_get("/readyz");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->body, "not ready: limiter 'uploads' saturated\n");
    const std::string m = metrics();
    EXPECT_EQ(sample_value(m, R"m(sluice_limiter_in_use{limiter="uploads"})m"), 1);
    EXPECT_EQ(sample_value(m, R"m(sluice_limiter_permits{limiter="uploads"})m"), 1);
    EXPECT_EQ(sample_value(m, "sluice_ready"), 0);
    contexts_.at(0).complete();
    ASSERT_TRUE(c.read_response()) << c.error();
    ASSERT_TRUE(srv().wait_exchanges_freed());
    auto after = admin_get("/readyz");
    ASSERT_TRUE(after);
    EXPECT_EQ(after->status, 200);
}

TEST_P(admin_test, readyz_is_503_while_draining_and_the_admin_listener_outlives_the_drain) {
    srv().config().shutdown_timeout_ms = 10'000;
    srv().start();
    test_client held(srv().port());
    ASSERT_TRUE(held.send(get_request("/hold")));
    ASSERT_TRUE(contexts_.wait_for(1));
    auto stopped = std::make_shared<std::atomic<bool>>(false);
    bg_.run([this, stopped] {
        srv().server().stop();
        stopped->store(true);
    });
    const auto deadline = test_clock::now() + default_timeout;
    std::optional<http_response> r;
    while (test_clock::now() < deadline) {
        r = admin_get("/readyz");
        if (r && r->status == 503) {
            break;
        }
    }
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503);
    EXPECT_EQ(r->body, "not ready: draining\n");
    EXPECT_FALSE(srv().server().ready());
    EXPECT_FALSE(stopped->load());
    contexts_.at(0).complete();
    auto h = held.read_response();
    ASSERT_TRUE(h) << held.error();
    // Not asserting Connection: close: readiness turns false before the loops learn of the stop
    // (on purpose), so the completion may beat it; drain_test covers the close.
    EXPECT_EQ(h->status, 200);
    bg_.join();
    EXPECT_TRUE(stopped->load());
}

// shutdown_delay_ms: after stop() the server says "draining" on /readyz but goes on accepting
// and serving, with Connection: close, until the delay ends; only then do the listeners close.
TEST_P(admin_test, shutdown_delay_serves_new_connections_with_readyz_503_then_closes_the_listeners) {
    constexpr std::uint32_t delay_ms = 800;
    srv().config().shutdown_delay_ms = delay_ms;
    srv().start();
    const auto port = srv().port();
    test_client idle(port);
    ASSERT_TRUE(idle.send(get_request("/")));
    ASSERT_TRUE(idle.read_response());
    auto stopped = std::make_shared<std::atomic<bool>>(false);
    const auto began = test_clock::now();
    bg_.run([this, stopped] {
        srv().server().stop();
        stopped->store(true);
    });
    ASSERT_TRUE(wait_until([&] {
        auto r = admin_get("/readyz");
        return r && r->status == 503 && r->body == "not ready: draining\n";
    }));
    // Still accepting: a new connection is answered, and told to close.
    test_client late(port);
    ASSERT_TRUE(late.send(get_request("/")));
    auto r = late.read_response();
    ASSERT_TRUE(r) << late.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Connection"), "close");
    // A keep-alive connection opened before the stop gets its next answer, with close.
    ASSERT_TRUE(idle.send(get_request("/items/1")));
    auto again = idle.read_response();
    ASSERT_TRUE(again) << idle.error();
    EXPECT_EQ(again->status, 200);
    EXPECT_EQ(again->header("Connection"), "close");
    if (test_clock::now() - began < milliseconds(delay_ms)) {
        EXPECT_FALSE(stopped->load()) << "the stop ended before shutdown_delay_ms";
    }
    // Then the listeners close and the stop ends.
    ASSERT_TRUE(wait_until([&] { return stopped->load(); }));
    EXPECT_GE(test_clock::now() - began, milliseconds(delay_ms));
    EXPECT_FALSE(test_client(port, milliseconds(500)).connected());
    bg_.join();
}

TEST_P(admin_test, a_second_stop_cuts_the_shutdown_delay_short) {
    srv().config().shutdown_delay_ms = 600'000;
    srv().start();
    auto stopped = std::make_shared<std::atomic<bool>>(false);
    bg_.run([this, stopped] {
        srv().server().stop();
        stopped->store(true);
    });
    ASSERT_TRUE(wait_until([&] {
        auto r = admin_get("/readyz");
        return r && r->status == 503;
    }));
    EXPECT_FALSE(stopped->load());
    srv().server().stop(); // returns once the server has stopped, long before 600 s
    EXPECT_TRUE(wait_until([&] { return stopped->load(); }));
    bg_.join();
}

SLUICE_BACKEND_SUITE(admin_test);

} // namespace
} // namespace sluice::test
