// sluice::client with an upstream whose name is looked up again (upstream_options::
// resolve_interval), on every backend × dispatch mode, with a fake_dns instead of /etc/hosts:
// calls follow the name to a new address, a failing lookup keeps the last addresses, the
// client's destruction does not wait for a hung lookup, and calls keep working while the
// address set grows and shrinks under them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sluice/client.h>
#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/fake_dns.h"
#include "support/fake_upstream.h"
#include "support/log_capture.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

/// Answers every request with `body`; keep-alive, or closing after each response.
fake_upstream::script answer_with(std::string body, bool keep_alive = true) {
    return [body, keep_alive](upstream_conn& c) {
        while (c.read_request()) {
            if (!c.write(upstream_response(200, body, keep_alive ? "" : "Connection: close\r\n")) ||
                !keep_alive) {
                return;
            }
        }
    };
}

class client_resolve_test : public backend_test {
protected:
    void start(upstream u) {
        client_options o;
        o.log = [this](log_level l, std::string_view text) { log_.record(l, text); };
        client_ = std::make_unique<client>(std::move(u), o);
        srv().route("GET", "/cb", [this](exchange& ex) {
            auto ctx = ex.start_async(10s);
            client_->send(ex.executor(), {.target = "/x"}, [ctx](result<client_response> out) mutable {
                response res;
                if (out) {
                    res.status(out->status).text(out->body);
                } else {
                    res.status(502).text(out.error().message());
                }
                ctx.complete(std::move(res));
            });
        });
        srv().start();
    }

    std::string call_body() {
        test_client c(srv().port(), 10s);
        EXPECT_TRUE(c.send("GET /cb HTTP/1.1\r\nHost: t\r\n\r\n")) << c.error();
        auto r = c.read_response();
        EXPECT_TRUE(r) << c.error();
        return r ? r->body : std::string();
    }

    void TearDown() override {
        backend_test::TearDown();
        client_.reset();
    }

    static std::string at(const fake_upstream& u) { return "127.0.0.1:" + std::to_string(u.port()); }

    log_capture log_;
    std::unique_ptr<client> client_;
};

TEST_P(client_resolve_test, calls_move_to_the_address_the_name_resolves_to_now) {
    fake_upstream a(answer_with("A"));
    fake_upstream b(answer_with("B"));
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{at(a)});
    start(upstream({"svc.test:80"}, {.resolve_interval = 20ms, .resolve = dns->function()}));
    EXPECT_EQ(call_body(), "A");
    ASSERT_EQ(a.accepted(), 1); // and it is idle in the pool now

    dns->answer({at(b)});
    EXPECT_TRUE(wait_until([&] { return call_body() == "B"; }, 5s));
    EXPECT_EQ(call_body(), "B");
    // The pooled connection to the address that went away is retired, not reused.
    EXPECT_TRUE(wait_until([&] { return a.closed() == a.accepted(); }));
    EXPECT_EQ(a.accepted(), 1);
    EXPECT_FALSE(log_.contains("does not resolve"));
}

TEST_P(client_resolve_test, a_failing_lookup_keeps_calls_on_the_last_addresses) {
    // Connection: close: every call connects anew, so it picks from the current set.
    fake_upstream a(answer_with("A", false));
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{at(a)});
    start(upstream({"svc.test:80"}, {.resolve_interval = 10ms, .resolve = dns->function()}));
    EXPECT_EQ(call_body(), "A");

    dns->fail(true);
    const int before = dns->lookups();
    ASSERT_TRUE(wait_until([&] { return dns->lookups() >= before + 5; }));
    EXPECT_EQ(call_body(), "A");
    EXPECT_EQ(call_body(), "A");
    EXPECT_GE(a.accepted(), 3);
    // Warned once, not once per lookup (upstream_refresher::warn_every).
    EXPECT_EQ(log_.count("client: upstream \"svc.test:80\" does not resolve (fake_dns: NXDOMAIN)"), 1u);
}

TEST_P(client_resolve_test, destroying_the_client_does_not_wait_for_a_hung_lookup) {
    fake_upstream a(answer_with("A"));
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{at(a)});
    start(upstream({"svc.test:80"}, {.resolve_interval = 10ms, .resolve = dns->function()}));
    EXPECT_EQ(call_body(), "A"); // the first call starts the resolver thread
    dns->block(true);
    ASSERT_TRUE(wait_until([&] { return dns->blocked_now(); }));

    const auto t0 = test_clock::now();
    client_.reset();
    const auto took = test_clock::now() - t0;
    // upstream_refresher::stop_wait (100 ms), with room for a sanitizer's slowness.
    EXPECT_LT(took, 2s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";

    // The lookup returns later: the detached thread then lets go of everything it held (the
    // server's loops hold the client's pools, and through them the upstream, until they end).
    dns->block(false);
    srv().stop();
    EXPECT_TRUE(wait_until([&] { return dns.use_count() == 1; }));
}

TEST_P(client_resolve_test, calls_keep_working_while_the_set_grows_and_shrinks) {
    fake_upstream a(answer_with("A"));
    fake_upstream b(answer_with("B"));
    fake_upstream c(answer_with("C", false));
    auto dns = std::make_shared<fake_dns>(std::vector<std::string>{at(a)});
    start(upstream({"svc.test:80"}, {.resolve_interval = 1ms, .resolve = dns->function()}));

    std::atomic<bool> stop{false};
    std::thread churn([&] {
        const std::vector<std::vector<std::string>> sets = {
            {at(a)}, {at(a), at(b), at(c)}, {at(c), at(b)}, {at(b)}, {at(c), at(a)}};
        for (std::size_t i = 0; !stop.load(); ++i) {
            dns->answer(sets[i % sets.size()]);
            std::this_thread::sleep_for(1ms); // pacing of the churn, not a synchronisation
        }
    });
    std::vector<std::thread> callers;
    std::atomic<int> good{0};
    std::atomic<int> bad{0};
    // 15 calls each, and on until the set was looked up again at least twice while they ran:
    // on a loaded machine 45 calls can end before the refresher's thread got its turn (seen
    // in CI: 2 lookups in 28 ms). Bounded: 10 s.
    const auto until = test_clock::now() + 10s;
    for (int t = 0; t < 3; ++t) {
        callers.emplace_back([&] {
            for (int i = 0; i < 15 || (dns->lookups() <= 2 && test_clock::now() < until); ++i) {
                const std::string body = call_body();
                (body == "A" || body == "B" || body == "C" ? good : bad)++;
            }
        });
    }
    for (auto& t : callers) {
        t.join();
    }
    stop = true;
    churn.join();
    EXPECT_GE(good.load(), 45);
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GT(dns->lookups(), 2);
}

SLUICE_BACKEND_SUITE(client_resolve_test);

} // namespace
} // namespace sluice::test
