// Keep-alive and pipelining on every backend × dispatch mode: several requests on one
// connection, many requests in one write answered in order (async ones included), the idle
// timeout, and the per-connection request cap.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

class keepalive_pipelining_test : public backend_test {
protected:
    void add_routes() {
        srv().route("GET", "/n/{i}", [](exchange& ex) {
            ex.response().text("n" + std::string(ex.request().path_param("i").value_or("?")));
        });
        srv().route("POST", "/echo",
                    [](exchange& ex) { ex.response().text(std::string(ex.request().body())); });
        // Answered from another thread after a delay: later requests in the pipeline are ready
        // first, and must still wait their turn.
        srv().route("GET", "/slow/{i}", [this](exchange& ex) {
            auto ctx = ex.start_async(std::chrono::seconds(5));
            std::string body = "slow" + std::string(ex.request().path_param("i").value_or("?"));
            bg_.run([ctx, body]() mutable {
                std::this_thread::sleep_for(std::chrono::milliseconds(40));
                ctx.complete(response(200).text(body));
            });
        });
    }
};

TEST_P(keepalive_pipelining_test, several_requests_on_one_connection) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(c.send(get_request("/n/" + std::to_string(i)))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << "request " << i << ": " << c.error();
        EXPECT_EQ(r->body, "n" + std::to_string(i));
        EXPECT_FALSE(r->header("Connection").has_value() && same_name(*r->header("Connection"), "close"));
    }
    EXPECT_EQ(srv().stats().connections_accepted, 1u);
    EXPECT_EQ(srv().stats().requests, 10u);
}

TEST_P(keepalive_pipelining_test, pipelined_requests_answered_in_order) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    std::string batch;
    for (int i = 0; i < 6; ++i) {
        batch += get_request("/n/" + std::to_string(i));
    }
    batch += body_request("POST", "/echo", "posted body");
    batch += "HEAD /n/7 HTTP/1.1\r\nHost: t\r\n\r\n";
    batch += get_request("/n/8");
    ASSERT_TRUE(c.send(batch)) << c.error();
    for (int i = 0; i < 6; ++i) {
        auto r = c.read_response();
        ASSERT_TRUE(r) << "response " << i << ": " << c.error();
        EXPECT_EQ(r->body, "n" + std::to_string(i));
    }
    auto post = c.read_response();
    ASSERT_TRUE(post) << c.error();
    EXPECT_EQ(post->body, "posted body");
    auto head = c.read_response(body_rule::head_request);
    ASSERT_TRUE(head) << c.error();
    EXPECT_EQ(head->header("Content-Length"), "2");
    auto last = c.read_response();
    ASSERT_TRUE(last) << c.error();
    EXPECT_EQ(last->body, "n8");
}

TEST_P(keepalive_pipelining_test, pipelined_async_requests_keep_their_order) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    const std::string batch = get_request("/slow/1") + get_request("/n/2") + get_request("/slow/3") +
                              get_request("/n/4") + get_request("/n/5");
    ASSERT_TRUE(c.send(batch)) << c.error();
    const auto rs = c.read_responses(5);
    ASSERT_EQ(rs.size(), 5u) << c.error();
    EXPECT_EQ(rs[0].body, "slow1");
    EXPECT_EQ(rs[1].body, "n2");
    EXPECT_EQ(rs[2].body, "slow3");
    EXPECT_EQ(rs[3].body, "n4");
    EXPECT_EQ(rs[4].body, "n5");
}

TEST_P(keepalive_pipelining_test, pipeline_split_at_odd_boundaries) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    std::string batch;
    for (int i = 0; i < 5; ++i) {
        batch += body_request("POST", "/echo", "body-" + std::to_string(i));
    }
    ASSERT_TRUE(c.send_split(batch, 7)) << c.error();
    for (int i = 0; i < 5; ++i) {
        auto r = c.read_response();
        ASSERT_TRUE(r) << "response " << i << ": " << c.error();
        EXPECT_EQ(r->body, "body-" + std::to_string(i));
    }
}

TEST_P(keepalive_pipelining_test, connection_close_in_a_pipeline_ends_it) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    const std::string batch =
        get_request("/n/1") + get_request("/n/2", "Connection: close\r\n") + get_request("/n/3");
    ASSERT_TRUE(c.send(batch)) << c.error();
    const auto rs = c.read_responses(2);
    ASSERT_EQ(rs.size(), 2u) << c.error();
    EXPECT_EQ(rs[1].body, "n2");
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(c.buffered().empty()) << "answered past Connection: close: " << printable(c.buffered());
}

TEST_P(keepalive_pipelining_test, bad_request_in_a_pipeline_answers_the_good_ones_first) {
    add_routes();
    srv().start();
    test_client c(srv().port());
    const std::string batch = get_request("/n/1") + get_request("/n/2") +
                              "GET / HTTP/1.1\r\nBroken header\r\n\r\n" + get_request("/n/3");
    ASSERT_TRUE(c.send(batch)) << c.error();
    const auto rs = c.read_responses(3);
    ASSERT_EQ(rs.size(), 3u) << c.error();
    EXPECT_EQ(rs[0].body, "n1");
    EXPECT_EQ(rs[1].body, "n2");
    EXPECT_EQ(rs[2].status, 400);
    EXPECT_TRUE(c.wait_closed()) << c.error();
    EXPECT_TRUE(c.buffered().empty()) << "answered past a 400: " << printable(c.buffered());
}

TEST_P(keepalive_pipelining_test, client_that_pipelines_without_reading_gets_every_answer) {
    // 300 requests whose answers (~3 MB) exceed every socket buffer: the server must apply
    // backpressure, not drop, reorder or buffer without bound.
    srv().route("GET", "/pad/{i}", [](exchange& ex) {
        const std::string i(ex.request().path_param("i").value_or("?"));
        ex.response().text(i + ":" + std::string(10'000, 'p'));
    });
    srv().start();
    test_client c(srv().port());
    std::string batch;
    constexpr int n = 300;
    for (int i = 0; i < n; ++i) {
        batch += get_request("/pad/" + std::to_string(i));
    }
    ASSERT_TRUE(c.send(batch)) << c.error();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 0; i < n; ++i) {
        auto r = c.read_response();
        ASSERT_TRUE(r) << "response " << i << ": " << c.error();
        ASSERT_EQ(r->body.substr(0, r->body.find(':')), std::to_string(i));
    }
}

TEST_P(keepalive_pipelining_test, idle_keepalive_timeout_closes_silently) {
    add_routes();
    srv().config().limits.idle_timeout_ms = 200;
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.send(get_request("/n/1"))) << c.error();
    ASSERT_TRUE(c.read_response()) << c.error();
    const auto idle_from = test_clock::now();
    EXPECT_TRUE(c.wait_closed()) << c.error();
    const auto idle = test_clock::now() - idle_from;
    EXPECT_GE(idle, std::chrono::milliseconds(150));
    EXPECT_TRUE(c.buffered().empty()) << "an idle close sends nothing: " << printable(c.buffered());
}

TEST_P(keepalive_pipelining_test, max_keepalive_requests_closes_after_the_last) {
    add_routes();
    srv().config().limits.max_keepalive_requests = 3;
    srv().start();
    test_client c(srv().port());
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(c.send(get_request("/n/" + std::to_string(i)))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << "request " << i << ": " << c.error();
        const bool says_close = r->header("Connection") && same_name(*r->header("Connection"), "close");
        EXPECT_EQ(says_close, i == 2) << "request " << i;
    }
    EXPECT_TRUE(c.wait_closed()) << c.error();
}

SLUICE_BACKEND_SUITE(keepalive_pipelining_test);

} // namespace
} // namespace sluice::test
