// sluice::client on a real server loop against a scripted upstream on 127.0.0.1, on every
// backend × dispatch mode (the blocking rows run their calls on the client's own loop): the
// three call styles, keep-alive reuse, every error kind, the stale keep-alive retry rule,
// and cancellation when the downstream client leaves.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sluice/client.h>
#include <sluice/coro.h>
#include <sluice/exchange.h>

#include "client/upstream.h"
#include "support/backend_matrix.h"
#include "support/error_text.h"
#include "support/fake_upstream.h"
#include "support/multi_client.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// "127.0.0.1:port" of a port bound once and never listening: connects to it are refused.
std::string closed_address() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
}

// The value of the request's Host field ("" if none).
std::string host_of(const std::string& request) {
    const auto at = request.find("\r\nHost: ");
    if (at == std::string::npos) {
        return {};
    }
    const auto begin = at + 8;
    return request.substr(begin, request.find("\r\n", begin) - begin);
}

void write_outcome(response& res, const result<client_response>& r) {
    if (r) {
        res.status(r->status).text(r->body);
    } else {
        res.status(502).text(error_text(r.error()));
    }
}

class client_test : public backend_test {
protected:
    void make_client(const std::vector<std::string>& addresses, client_options o = {}) {
        client_ = std::make_unique<client>(upstream(addresses), o);
    }

    static client_request to_upstream(exchange& ex) {
        client_request r{.method = std::string(ex.request().method()), .target = "/x"};
        if (auto v = ex.request().header("x-up")) {
            r.headers.push_back({"X-Up", std::string(*v)});
        }
        return r;
    }

    /// /cb: callback style (complete); /co: coroutine style (the body forwarded by view).
    void add_routes() {
        for (const char* method : {"GET", "POST"}) {
            srv().route(method, "/cb", [this](exchange& ex) {
                auto ctx = ex.start_async(10s);
                client_request r = to_upstream(ex);
                r.body = std::string(ex.request().body());
                client_->send(ex.executor(), std::move(r), [ctx](result<client_response> out) mutable {
                    response res;
                    write_outcome(res, out);
                    ctx.complete(std::move(res));
                });
            });
            srv().route(method, "/co", [this](exchange& ex) -> task<> {
                client_request r = to_upstream(ex);
                r.body_view = ex.request().body();
                result<client_response> out = co_await client_->async_send(ex.executor(), std::move(r));
                write_outcome(ex.response(), out);
            });
        }
    }

    // One GET in the callback style and one in the coroutine style, both waiting for `up`.
    void call_in_both_styles(fake_upstream& up, std::vector<std::unique_ptr<test_client>>& clients) {
        for (const char* style : {"/cb", "/co"}) {
            clients.push_back(std::make_unique<test_client>(srv().port(), 10s));
            ASSERT_TRUE(clients.back()->send(get_request(style))) << clients.back()->error();
        }
        ASSERT_TRUE(wait_until([&] { return up.accepted() == 2; }));
        ASSERT_TRUE(srv().wait_suspended(2));
    }

    http_response call(std::string_view target, std::string_view method = "GET", std::string_view body = {}) {
        test_client c(srv().port(), 10s);
        std::string req = std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: t\r\n";
        if (!body.empty() || method == "POST") {
            req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
        }
        req += "\r\n";
        req += body;
        EXPECT_TRUE(c.send(req)) << c.error();
        auto r = c.read_response();
        EXPECT_TRUE(r) << c.error();
        return r ? *r : http_response{};
    }

    void TearDown() override {
        backend_test::TearDown();
        client_.reset();
    }

    std::unique_ptr<client> client_;
};

TEST_P(client_test, both_styles_reuse_one_keep_alive_connection) {
    std::atomic<int> requests{0};
    fake_upstream up([&](upstream_conn& c) {
        while (auto req = c.read_request()) {
            ++requests;
            const bool post = req->rfind("POST", 0) == 0;
            const std::string body = post ? req->substr(req->find("\r\n\r\n") + 4) : "got";
            if (!c.write(upstream_response(200, body))) {
                return;
            }
        }
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    for (const char* style : {"/cb", "/co"}) {
        auto r = call(style);
        EXPECT_EQ(r.status, 200) << style << " " << r.body;
        EXPECT_EQ(r.body, "got");
        auto p = call(style, "POST", "payload");
        EXPECT_EQ(p.status, 200) << style << " " << p.body;
        EXPECT_EQ(p.body, "payload");
    }
    EXPECT_EQ(requests.load(), 4);
    // Sequential calls on one loop (one I/O thread in tests) share one pooled connection; the
    // pool of a blocking-backend server lives on the client's own loop.
    EXPECT_EQ(up.accepted(), 1);
    EXPECT_EQ(client_->stats().reused, 3u);
}

TEST_P(client_test, refused_on_a_closed_port) {
    make_client({closed_address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::refused));
    EXPECT_EQ(call("/co").body, error_text(client_errc::refused));
}

TEST_P(client_test, response_timed_out) {
    fake_upstream up([](upstream_conn& c) {
        (void)c.read_request();
        (void)c.wait_closed(3s); // never answers
    });
    make_client({up.address()}, {.response_timeout = 200ms});
    add_routes();
    srv().start();
    const auto t0 = test_clock::now();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::response_timed_out));
    EXPECT_LT(test_clock::now() - t0, 2s);
}

TEST_P(client_test, pool_exhausted_and_acquire_timed_out) {
    std::atomic<bool> release{false};
    fake_upstream up([&](upstream_conn& c) {
        while (c.read_request()) {
            (void)wait_until([&] { return release.load(); }, 5s);
            if (!c.write(upstream_response(200, "late"))) {
                return;
            }
        }
    });
    make_client({up.address()}, {.max_connections = 1, .max_pending = 1, .acquire_timeout = 150ms});
    add_routes();
    srv().start();
    // The first call holds the only connection.
    test_client first(srv().port(), 10s);
    ASSERT_TRUE(first.send(get_request("/cb"))) << first.error();
    ASSERT_TRUE(wait_until([&] { return up.accepted() == 1; }));
    // The second waits acquire_timeout, the third meanwhile finds the queue full.
    test_client second(srv().port(), 10s);
    ASSERT_TRUE(second.send(get_request("/co"))) << second.error();
    ASSERT_TRUE(wait_until([&] { return srv().stats().exchanges_suspended >= 2; }));
    EXPECT_EQ(call("/cb").body, error_text(client_errc::pool_exhausted));
    auto r2 = second.read_response();
    ASSERT_TRUE(r2) << second.error();
    EXPECT_EQ(r2->body, error_text(client_errc::acquire_timed_out));
    release = true;
    auto r1 = first.read_response();
    ASSERT_TRUE(r1) << first.error();
    EXPECT_EQ(r1->body, "late");
}

TEST_P(client_test, reset_before_any_response_byte) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            c.reset();
        }
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    // A fresh connection is never retried, whatever the method.
    EXPECT_EQ(call("/cb").body, error_text(client_errc::reset));
    EXPECT_EQ(client_->stats().retried, 0u);
}

TEST_P(client_test, garbage_is_malformed) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.write("this is not HTTP at all\r\n\r\n");
            (void)c.wait_closed(2s);
        }
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/co").body, error_text(client_errc::malformed_response));
}

TEST_P(client_test, conflicting_framing_is_malformed) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.write(
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
            (void)c.wait_closed(2s);
        }
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::malformed_response));
}

TEST_P(client_test, response_too_large) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.write(upstream_response(200, std::string(100'000, 'x')));
            (void)c.wait_closed(2s);
        }
    });
    make_client({up.address()}, {.max_response_bytes = 10'000});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::response_too_large));
}

// The head has a bound of its own (nginx: "upstream sent too big header"), far below
// max_response_bytes: the gateway passes a head on whole to its clients.
void answer_with_a_20k_header(upstream_conn& c) {
    while (c.read_request()) {
        (void)c.write("HTTP/1.1 200 OK\r\nX-Big: " + std::string(20'000, 'y') +
                      "\r\nContent-Length: 2\r\n\r\nok");
    }
}

TEST_P(client_test, a_head_over_max_response_head_bytes_is_too_large) {
    fake_upstream up(answer_with_a_20k_header);
    make_client({up.address()}, {.max_response_head_bytes = 16 * 1024});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, error_text(client_errc::response_too_large));
    EXPECT_EQ(call("/co").body, error_text(client_errc::response_too_large));
}

TEST_P(client_test, a_head_within_max_response_head_bytes_is_passed_on) {
    fake_upstream up(answer_with_a_20k_header);
    make_client({up.address()}, {.max_response_head_bytes = 32 * 1024});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "ok");
    EXPECT_EQ(call("/co").body, "ok");
}

TEST_P(client_test, stale_pooled_connection_is_retried_for_get_only) {
    // The first connection answers one request, then takes the next one and closes without a
    // word (an upstream whose keep-alive timeout met our request). Later connections answer.
    std::atomic<int> conn_no{0};
    std::atomic<int> requests{0};
    fake_upstream up([&](upstream_conn& c) {
        const int n = ++conn_no;
        if (n == 1) {
            if (c.read_request()) {
                ++requests;
                (void)c.write(upstream_response(200, "first"));
            }
            if (c.read_request()) {
                ++requests;
            }
            return; // closes
        }
        answer_all(c);
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "first");
    EXPECT_EQ(call("/cb").body, "ok"); // retried on a fresh connection
    EXPECT_EQ(client_->stats().retried, 1u);
    EXPECT_EQ(requests.load(), 2);
    EXPECT_EQ(up.accepted(), 2);
}

TEST_P(client_test, stale_pooled_connection_is_not_retried_for_a_post_with_a_body) {
    std::atomic<int> conn_no{0};
    fake_upstream up([&](upstream_conn& c) {
        if (++conn_no == 1) {
            if (c.read_request()) {
                (void)c.write(upstream_response(200, "first"));
            }
            (void)c.read_request(); // the POST's body went out: it may have had its effect
            return;
        }
        answer_all(c);
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "first");
    EXPECT_EQ(call("/cb", "POST", "charge the card").body, error_text(client_errc::reset));
    EXPECT_EQ(client_->stats().retried, 0u);
    EXPECT_EQ(up.accepted(), 1);
}

TEST_P(client_test, downstream_disconnect_cancels_the_call_and_leaks_nothing) {
    std::atomic<bool> upstream_saw_close{false};
    std::atomic<int> conn_no{0};
    fake_upstream up([&](upstream_conn& c) {
        if (++conn_no == 1) { // the warm-up: answers and closes, nothing stays pooled
            if (c.read_request()) {
                (void)c.write(upstream_response(200, "warm", "Connection: close\r\n"));
            }
            return;
        }
        if (c.read_request()) {
            upstream_saw_close = c.wait_closed(5s);
        }
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/co").body, "warm");
    ASSERT_TRUE(wait_until([&] { return client_->stats().open == 0; }));
    // Every socket of the warm-up closed on all three sides before counting.
    ASSERT_TRUE(wait_until([&] { return up.closed() == 1 && srv().stats().connections_open == 0; }));
    const int baseline = open_fd_count();
    {
        test_client c(srv().port());
        ASSERT_TRUE(c.send(get_request("/co"))) << c.error();
        ASSERT_TRUE(wait_until([&] { return conn_no.load() == 2; }));
        ASSERT_TRUE(srv().wait_suspended(1));
        c.close_abortive();
    }
    EXPECT_TRUE(wait_until([&] { return upstream_saw_close.load(); }))
        << "the upstream connection stayed open";
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }));
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_TRUE(wait_until([&] { return open_fd_count() == baseline; }))
        << open_fd_count() << " fds open, " << baseline << " before";
    EXPECT_EQ(client_->stats().failed, 1u);
}

TEST_P(client_test, a_dead_address_is_skipped_for_fail_timeout) {
    fake_upstream up(answer_all);
    make_client({closed_address(), up.address()}, {.max_requests_per_connection = 1});
    add_routes();
    srv().start();
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(call("/cb").body, "ok") << i;
    }
    // Four connections to the live address, at most one attempt at the dead one.
    EXPECT_LE(client_->stats().connects, 5u);
    EXPECT_EQ(up.accepted(), 4);
}

// max_connections counts connections being opened too. When one fails, the call goes on to
// the next address in the failed connection's place: the slot it frees must not go to a
// waiter as well (found by review: one refusal with two calls waiting made two connections
// against a cap of one). And the waiters are sent where the failure now says to go.
TEST_P(client_test, a_failed_connect_retried_elsewhere_keeps_the_connection_cap) {
    std::atomic<int> open{0};
    std::atomic<int> max_open{0};
    fake_upstream up([&](upstream_conn& c) {
        const int now = ++open;
        int seen = max_open.load();
        while (now > seen && !max_open.compare_exchange_weak(seen, now)) {
        }
        while (c.read_request()) {
            std::this_thread::sleep_for(50ms); // the calls overlap if the cap lets them
            if (!c.write(upstream_response(200, "ok"))) {
                break;
            }
        }
        --open;
    });
    // The rotation starts at the dead address.
    make_client({closed_address(), up.address()}, {.max_connections = 1, .max_pending = 10});
    srv().route("GET", "/fan", [this](exchange& ex) {
        // Three calls from one dispatch: the first opens the one connection (to the dead
        // address), the other two wait for it before any completion can come.
        auto ctx = ex.start_async(10s);
        auto bodies = std::make_shared<std::vector<std::string>>();
        auto left = std::make_shared<std::atomic<int>>(3);
        auto mu = std::make_shared<std::mutex>();
        for (int i = 0; i < 3; ++i) {
            client_->send(ex.executor(), client_request{.method = "GET", .target = "/x"},
                          [ctx, bodies, left, mu](result<client_response> out) mutable {
                              {
                                  std::lock_guard lock(*mu);
                                  bodies->push_back(out ? out->body : error_text(out.error()));
                              }
                              if (--*left == 0) {
                                  std::string all;
                                  for (const auto& b : *bodies) {
                                      all += b + ";";
                                  }
                                  ctx.complete(response(200).text(all));
                              }
                          });
        }
    });
    srv().start();
    EXPECT_EQ(call("/fan").body, "ok;ok;ok;");
    EXPECT_EQ(max_open.load(), 1) << "connections open at once to the live address, with max_connections 1";
    EXPECT_EQ(up.accepted(), 1);
}

TEST_P(client_test, a_live_address_is_found_while_other_loops_turn_the_rotation) {
    fake_upstream up(answer_all);
    const upstream target({closed_address(), up.address()});
    client_ = std::make_unique<client>(target, client_options{.max_requests_per_connection = 1});
    add_routes();
    srv().start();
    // Two calls: the rotation starts at the dead address, which is then marked for fail_timeout.
    EXPECT_EQ(call("/cb").body, "ok");
    EXPECT_EQ(call("/cb").body, "ok");
    // The calls of other loops (other I/O threads, other clients of this upstream) take turns
    // from the same rotation while this loop picks: a call must still find the live address.
    std::atomic<bool> stop{false};
    std::thread other_loops([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            target.state()->next.fetch_add(1, std::memory_order_relaxed);
        }
    });
    int refused = 0;
    for (int i = 0; i < 60; ++i) {
        const std::string body = call("/cb").body;
        refused += body == error_text(client_errc::refused) ? 1 : 0;
        EXPECT_TRUE(body == "ok" || body == error_text(client_errc::refused)) << body;
    }
    stop = true;
    other_loops.join();
    EXPECT_EQ(refused, 0) << "calls refused while " << up.address() << " was up";
}

TEST_P(client_test, the_host_header_names_the_address_the_request_goes_to) {
    // Two upstreams, each recording the Host of every request it gets; one call per
    // connection, so the rotation alternates between them.
    struct seen {
        std::mutex mu;
        std::vector<std::string> hosts;
    };
    seen a_seen;
    seen b_seen;
    auto recording = [](seen& s) {
        return [&s](upstream_conn& c) {
            while (auto req = c.read_request()) {
                {
                    std::lock_guard lock(s.mu);
                    s.hosts.push_back(host_of(*req));
                }
                if (!c.write(upstream_response(200, "ok"))) {
                    return;
                }
            }
        };
    };
    fake_upstream a(recording(a_seen));
    fake_upstream b(recording(b_seen));
    make_client({a.address(), "http://" + b.address()}, {.max_requests_per_connection = 1});
    add_routes();
    srv().start();
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(call(i % 2 == 0 ? "/cb" : "/co").body, "ok") << i;
    }
    std::lock_guard la(a_seen.mu);
    std::lock_guard lb(b_seen.mu);
    EXPECT_EQ(a_seen.hosts, (std::vector<std::string>{a.address(), a.address()}));
    EXPECT_EQ(b_seen.hosts, (std::vector<std::string>{b.address(), b.address()}));
}

TEST_P(client_test, a_retry_on_another_address_names_that_address_in_its_host_header) {
    // Each connection answers one request, then takes the next and resets it without a word
    // (a stale keep-alive connection): the second call is retried on a fresh connection, which
    // the rotation opens to the other address.
    struct seen {
        std::mutex mu;
        std::vector<std::string> hosts;
    };
    seen a_seen;
    seen b_seen;
    auto stale_after_one = [](seen& s) {
        return [&s](upstream_conn& c) {
            if (auto req = c.read_request()) {
                std::lock_guard lock(s.mu);
                s.hosts.push_back(host_of(*req));
            }
            (void)c.write(upstream_response(200, "ok"));
            if (c.read_request()) {
                c.reset();
            }
        };
    };
    fake_upstream a(stale_after_one(a_seen));
    fake_upstream b(stale_after_one(b_seen));
    make_client({a.address(), b.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "ok");
    EXPECT_EQ(call("/cb").body, "ok"); // on the pooled connection to a, reset: retried on b
    EXPECT_EQ(client_->stats().retried, 1u);
    std::lock_guard la(a_seen.mu);
    std::lock_guard lb(b_seen.mu);
    EXPECT_EQ(a_seen.hosts, (std::vector<std::string>{a.address()}));
    EXPECT_EQ(b_seen.hosts, (std::vector<std::string>{b.address()}));
}

TEST_P(client_test, chunked_interim_and_close_delimited_responses) {
    std::atomic<int> conn_no{0};
    fake_upstream up([&](upstream_conn& c) {
        if (++conn_no == 1) {
            if (c.read_request()) {
                (void)c.write(
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "4\r\nchun\r\n3\r\nked\r\n0\r\n\r\n");
            }
            if (c.read_request()) { // the same connection: chunked framing kept it reusable
                (void)c.write("HTTP/1.1 200 OK\r\n\r\nto the end");
            }
            return; // closes: the end of the second body
        }
        answer_all(c);
    });
    make_client({up.address()});
    add_routes();
    srv().start();
    EXPECT_EQ(call("/cb").body, "chunked");
    EXPECT_EQ(call("/co").body, "to the end");
    EXPECT_EQ(up.accepted(), 1);
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }))
        << "a close-delimited connection is not pooled";
}

// A 304 may carry the Content-Length of the representation (RFC 9110 §8.6), and neither it nor
// a 204 has a body whatever it declares (RFC 9112 §6.3 (1)): the call ends with the head, not at
// the response timeout. Bytes after such a head are no body: that connection is not pooled.
TEST_P(client_test, no_content_statuses_end_with_their_head_whatever_they_declare) {
    std::atomic<int> conn_no{0};
    fake_upstream up([&](upstream_conn& c) {
        if (++conn_no == 1) {
            if (c.read_request()) {
                (void)c.write("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\nETag: \"x\"\r\n\r\n");
            }
            if (c.read_request()) { // the same connection: nothing of the 304 was left on it
                (void)c.write("HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\nhello");
            }
            (void)c.wait_closed(5s);
            return;
        }
        answer_all(c);
    });
    make_client({up.address()}, {.response_timeout = 5s});
    add_routes();
    srv().start();
    const auto began = std::chrono::steady_clock::now();
    EXPECT_EQ(call("/cb").status, 304);
    EXPECT_EQ(call("/co").status, 204);
    EXPECT_LT(std::chrono::steady_clock::now() - began, 4s) << "a call waited for a body";
    EXPECT_EQ(up.accepted(), 1);
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }))
        << "a connection with bytes after a 204's head is not pooled";
    EXPECT_EQ(call("/cb").body, "ok");
    EXPECT_EQ(up.accepted(), 2);
}

TEST_P(client_test, many_concurrent_calls_share_a_small_pool) {
    // 40 calls at once, 3 connections: the rest wait their turn (FIFO) and all succeed.
    std::atomic<int> in_flight{0};
    std::atomic<int> max_in_flight{0};
    fake_upstream up([&](upstream_conn& c) {
        while (c.read_request()) {
            const int now = ++in_flight;
            int seen = max_in_flight.load();
            while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
            }
            std::this_thread::sleep_for(2ms); // a little work, so that calls overlap
            --in_flight;
            if (!c.write(upstream_response(200, "ok"))) {
                return;
            }
        }
    });
    make_client({up.address()}, {.max_connections = 3, .max_pending = 100});
    add_routes();
    srv().start();
    multi_client mc;
    for (int i = 0; i < 40; ++i) {
        mc.add(srv().port(), get_request(i % 2 == 0 ? "/cb" : "/co"));
    }
    ASSERT_TRUE(mc.send_all(10s)) << mc.first_error();
    ASSERT_TRUE(mc.read_all(20s)) << mc.first_error();
    for (std::size_t i = 0; i < mc.size(); ++i) {
        ASSERT_TRUE(mc.response(i)) << i;
        EXPECT_EQ(mc.response(i)->body, "ok") << i;
    }
    EXPECT_LE(up.accepted(), 3);
    EXPECT_LE(max_in_flight.load(), 3);
    EXPECT_EQ(client_->stats().completed, 40u);
}

// A server stop is a drain, and an exchange waiting for its upstream call is a request in
// progress: the call goes on and its answer reaches the client (a gateway that cancelled its
// calls at the stop would answer every proxied request in flight with 502).
TEST_P(client_test, server_stop_lets_calls_in_flight_finish_in_the_drain) {
    auto go = std::make_shared<std::atomic<bool>>(false);
    fake_upstream up([go](upstream_conn& c) {
        if (c.read_request()) {
            (void)wait_until([&] { return go->load(); });
            (void)c.write(upstream_response(200, "late but here"));
        }
    });
    make_client({up.address()});
    add_routes();
    srv().config().shutdown_timeout_ms = 10'000;
    srv().start();
    std::vector<std::unique_ptr<test_client>> clients;
    ASSERT_NO_FATAL_FAILURE(call_in_both_styles(up, clients));
    auto stopped = std::make_shared<std::atomic<bool>>(false);
    bg_.run([this, stopped] {
        srv().stop();
        stopped->store(true);
    });
    // The drain has begun (no new connection is accepted); then the upstream answers.
    ASSERT_TRUE(wait_until([&] { return !test_client(srv().port(), 500ms).connected(); }));
    EXPECT_FALSE(stopped->load());
    go->store(true);
    for (auto& c : clients) {
        auto r = c->read_response();
        ASSERT_TRUE(r) << c->error();
        EXPECT_EQ(r->status, 200) << r->body;
        EXPECT_EQ(r->body, "late but here");
    }
    EXPECT_TRUE(wait_until([&] { return stopped->load(); }));
    bg_.join();
    EXPECT_EQ(client_->stats().completed, 2u);
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == 0; }));
}

// When the drain runs out the exchanges end (503), and the calls still running are cancelled:
// the stop does not wait for the upstream's response_timeout.
TEST_P(client_test, server_stop_cancels_calls_still_running_when_the_drain_ends) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.wait_closed(10s); // would hold the call for response_timeout
        }
    });
    make_client({up.address()});
    add_routes();
    srv().config().shutdown_timeout_ms = 300;
    srv().start();
    std::vector<std::unique_ptr<test_client>> clients;
    ASSERT_NO_FATAL_FAILURE(call_in_both_styles(up, clients));
    const auto t0 = test_clock::now();
    srv().stop();
    // shutdown_timeout_ms, then at most the second the drain gives a response to leave.
    EXPECT_LT(test_clock::now() - t0, 4000ms) << "the stop waited for the upstream";
    for (auto& c : clients) {
        auto r = c->read_response();
        ASSERT_TRUE(r) << c->error();
        EXPECT_EQ(r->status, 503) << r->body;
    }
    // On a reactor both calls live on the server's loop, whose pool ends them once the
    // server's connections are gone. On the blocking backend they live on the client's own
    // loop, which outlives the server: the coroutine's call ends with its exchange, the
    // callback's runs on (to response_timeout, or until the client goes).
    const int left = connection_per_thread() ? 1 : 0;
    EXPECT_TRUE(wait_until([&] { return up.closed() == 2 - left; })) << "an upstream connection stayed open";
    EXPECT_TRUE(wait_until([&] { return client_->stats().open == static_cast<std::size_t>(left); }));
}

SLUICE_BACKEND_SUITE(client_test);

} // namespace
} // namespace sluice::test
