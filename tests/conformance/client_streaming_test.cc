// client::send_streaming's pause_body() asked for before the body began, on every backend ×
// dispatch mode against a scripted upstream: before the call has a connection, while its head
// is awaited, and from inside on_head. Each time the head comes, then nothing of the body (not
// even the rest of the read that brought the head) until resume_body(), and response_timeout
// does not cut the call while it is held; after resume_body() the whole body follows.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <sluice/client.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/error_text.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr auto cst_response_timeout = 200ms;

/// What the streamed call's callbacks saw.
struct cst_seen {
    std::mutex mu;
    client_call call;      // under mu
    bool call_set = false; // under mu
    std::atomic<bool> head{false};
    std::atomic<std::size_t> body_bytes{0};
    std::atomic<bool> ended{false};
};

/// The upstream: takes the request, waits until the test says so, then writes `response` in
/// one write (head and body reach the client in one read) and, unless it closes, waits.
struct cst_upstream {
    std::string response;
    bool close_after = false;
    std::atomic<bool> got_request{false};
    std::atomic<bool> answer{false};

    void run(upstream_conn& c) {
        if (!c.read_request()) {
            return;
        }
        got_request = true;
        if (!wait_until([&] { return answer.load(); }, 10s) || !c.write(response) || close_after) {
            return; // returning closes the connection
        }
        (void)c.wait_closed(10s);
    }
};

class client_streaming_test : public backend_test {
protected:
    /// GET /s?pause=now|on_head|none: streams the upstream's answer and reports "bytes end".
    /// now: pause_body() right after send_streaming (the call has no connection yet); on_head:
    /// from inside on_head.
    void start(const std::string& address) {
        client_ = std::make_unique<client>(upstream({address}),
                                           client_options{.response_timeout = cst_response_timeout});
        srv().route("GET", "/s", [this, st = seen_](exchange& ex) {
            const std::string when(ex.request().query_param("pause").value_or("none"));
            auto ctx = ex.start_async(20s);
            const client_call call = client_->send_streaming(
                ex.executor(), {.target = "/up"},
                {.on_head =
                     [st, when](const client_response&) {
                         st->head = true;
                         std::lock_guard lock(st->mu);
                         if (when == "on_head" && st->call_set) {
                             st->call.pause_body();
                         }
                     },
                 .on_body = [st](std::string_view piece) { st->body_bytes += piece.size(); },
                 .on_end =
                     [st, ctx](std::error_code e) mutable {
                         st->ended = true;
                         response res;
                         res.text(std::to_string(st->body_bytes.load()) + " " +
                                  (e ? error_text(e) : "whole"));
                         ctx.complete(std::move(res));
                     }});
            std::lock_guard lock(st->mu);
            st->call = call;
            st->call_set = true;
            if (when == "now") {
                call.pause_body();
            }
        });
        srv().start();
    }

    client_call the_call() {
        EXPECT_TRUE(wait_until([&] {
            std::lock_guard lock(seen_->mu);
            return seen_->call_set;
        }));
        std::lock_guard lock(seen_->mu);
        return seen_->call;
    }

    /// Sends GET /s?pause=<when>, lets the upstream answer once it has the request (after
    /// pause_body() for "request"), and checks that the body is held, then whole after resume.
    void expect_held_until_resumed(cst_upstream& script, const std::string& when, std::size_t body_size) {
        test_client c(srv().port(), 10s);
        ASSERT_TRUE(c.send(get_request("/s?pause=" + (when == "request" ? std::string("none") : when))))
            << c.error();
        ASSERT_TRUE(wait_until([&] { return script.got_request.load(); }));
        const client_call call = the_call(); // stored (and paused for "now") before any head can come
        if (when == "request") {
            call.pause_body(); // the call is on its connection, waiting for the head
        }
        script.answer = true;
        ASSERT_TRUE(wait_until([&] { return seen_->head.load() || seen_->ended.load(); }));
        EXPECT_TRUE(seen_->head.load())
            << "the head did not come: " << c.read_response().value_or(http_response{}).body;
        // Held for three response timeouts: the reader sets the pace, the upstream is not slow.
        std::this_thread::sleep_for(3 * cst_response_timeout);
        EXPECT_EQ(seen_->body_bytes.load(), 0u) << "body bytes came while paused";
        EXPECT_FALSE(seen_->ended.load()) << "the call ended while paused";
        call.resume_body();
        auto r = c.read_response();
        ASSERT_TRUE(r) << c.error();
        EXPECT_EQ(r->body, std::to_string(body_size) + " whole");
    }

    void TearDown() override {
        backend_test::TearDown();
        client_.reset();
    }

    std::unique_ptr<client> client_;
    std::shared_ptr<cst_seen> seen_ = std::make_shared<cst_seen>();
};

TEST_P(client_streaming_test, a_pause_before_the_call_has_a_connection_holds_the_body_until_resume) {
    cst_upstream script{.response = upstream_response(200, std::string(1000, 'x'))};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    expect_held_until_resumed(script, "now", 1000);
    // The held body ended cleanly: its connection went back to the pool.
    EXPECT_TRUE(wait_until([&] { return client_->stats().idle == 1; }));
}

TEST_P(client_streaming_test, a_pause_while_the_head_is_awaited_lets_the_head_in_and_holds_the_body) {
    cst_upstream script{.response = upstream_response(200, std::string(1000, 'x'))};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    expect_held_until_resumed(script, "request", 1000);
}

TEST_P(client_streaming_test, a_pause_from_inside_on_head_holds_the_rest_of_that_read) {
    cst_upstream script{.response = upstream_response(200, std::string(1000, 'x'))};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    expect_held_until_resumed(script, "on_head", 1000);
}

TEST_P(client_streaming_test, a_held_close_delimited_body_loses_nothing_when_the_upstream_closes) {
    cst_upstream script{.response = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + std::string(1000, 'x'),
                        .close_after = true};
    fake_upstream up([&](upstream_conn& c) { script.run(c); });
    start(up.address());
    expect_held_until_resumed(script, "now", 1000);
}

/// What the owner test's callbacks saw of the object they point to.
struct owned_state {
    std::string head_type; // on_head: the head moved in, kept here
    std::size_t body_bytes = 0;
};

TEST_P(client_streaming_test, the_owner_keeps_plain_pointer_callbacks_valid_and_is_released_after_on_end) {
    fake_upstream up([](upstream_conn& c) {
        if (c.read_request() && c.write(upstream_response(200, "hello", "Content-Type: text/plain\r\n"))) {
            (void)c.wait_closed(10s);
        }
    });
    client_ = std::make_unique<client>(upstream({up.address()}));
    std::mutex mu;
    std::weak_ptr<owned_state> watched; // under mu
    srv().route("GET", "/o", [&](exchange& ex) {
        auto ctx = ex.start_async(20s);
        // The handler's only strong reference goes into owner: the callbacks hold a plain pointer.
        auto state = std::make_shared<owned_state>();
        owned_state* p = state.get();
        {
            std::lock_guard lock(mu);
            watched = state;
        }
        (void)client_->send_streaming(
            ex.executor(), {.target = "/up"},
            {.on_head =
                 [p](client_response head) {
                     p->head_type = std::string(head.header("content-type").value_or(""));
                 },
             .on_body = [p](std::string_view piece) { p->body_bytes += piece.size(); },
             .on_end =
                 [p, ctx](std::error_code e) mutable {
                     // Reads the object through its plain pointer: under ASan a use after free
                     // if the owner had gone before on_end.
                     response res;
                     res.text(p->head_type + " " + std::to_string(p->body_bytes) + " " +
                              (e ? error_text(e) : "whole"));
                     ctx.complete(std::move(res));
                 },
             .owner = std::move(state)});
    });
    srv().start();
    test_client c(srv().port(), 10s);
    ASSERT_TRUE(c.send(get_request("/o"))) << c.error();
    auto r = c.read_response();
    ASSERT_TRUE(r) << c.error();
    EXPECT_EQ(r->body, "text/plain 5 whole");
    // Released with the callbacks once the call has ended: nothing keeps it.
    EXPECT_TRUE(wait_until([&] {
        std::lock_guard lock(mu);
        return watched.expired();
    })) << "the owner outlived its ended call";
}

SLUICE_BACKEND_SUITE(client_streaming_test);

} // namespace
} // namespace sluice::test
