// The gateway's timeouts on every backend × dispatch mode, in the three styles that suspend
// (async, resume, co): the upstream call is bounded by the client's own timeouts (504,
// docs/gateway.md), not by the server's async_timeout_ms, which would otherwise end a call
// that is still within --response-timeout-ms with a 503.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway.h"
#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* suspending_styles[] = {"async", "resume", "co"};

// One client per style, each with its request sent: the three calls wait at once.
std::vector<std::unique_ptr<test_client>> send_to_every_style(std::uint16_t port) {
    std::vector<std::unique_ptr<test_client>> clients;
    for (const char* style : suspending_styles) {
        clients.push_back(std::make_unique<test_client>(port));
        EXPECT_TRUE(clients.back()->send(get_request(std::string("/api/") + style + "/work")))
            << clients.back()->error();
    }
    return clients;
}

class gateway_timeout_test : public backend_test {
protected:
    void start_gateway(const std::string& address, std::chrono::milliseconds response_timeout) {
        // Far under every upstream wait below: the calls must not be bounded by it.
        srv().config().async_timeout_ms = 150;
        client_options options;
        options.response_timeout = response_timeout;
        gw_ = std::make_unique<::gateway::gateway>(upstream({address}), options);
        for (auto& r : ::gateway::routes(*gw_)) {
            srv().route(r.method, r.path, std::move(r.h));
        }
        srv().start();
    }

    /// /api/{style}/work in every suspending style at once: each answered `status`, with `body`
    /// unless null; then every exchange is freed.
    void expect_every_style_answers(int status, const char* body) {
        auto clients = send_to_every_style(srv().port());
        for (std::size_t i = 0; i < std::size(suspending_styles); ++i) {
            const char* style = suspending_styles[i];
            auto r = clients[i]->read_response();
            ASSERT_TRUE(r) << style << ": " << clients[i]->error();
            EXPECT_EQ(r->status, status) << style << ": " << r->body;
            if (body != nullptr) {
                EXPECT_EQ(r->body, body) << style;
            }
        }
        EXPECT_TRUE(srv().wait_exchanges_freed());
    }

    void TearDown() override {
        backend_test::TearDown();
        gw_.reset();
    }

    std::unique_ptr<::gateway::gateway> gw_;
};

TEST_P(gateway_timeout_test, an_upstream_slower_than_the_async_timeout_is_waited_for) {
    fake_upstream up([](upstream_conn& c) {
        while (c.read_request()) {
            std::this_thread::sleep_for(400ms);
            if (!c.write(upstream_response(200, "late"))) {
                return;
            }
        }
    });
    start_gateway(up.address(), 5s);
    expect_every_style_answers(200, "late");
}

TEST_P(gateway_timeout_test, a_body_streaming_for_longer_than_the_async_timeout_arrives_whole) {
    fake_upstream up([](upstream_conn& c) {
        while (c.read_request()) {
            if (!c.write("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n")) {
                return;
            }
            for (const char* piece : {"ab", "cd", "ef"}) {
                std::this_thread::sleep_for(200ms); // each silence over the async timeout
                if (!c.write(piece)) {
                    return;
                }
            }
        }
    });
    start_gateway(up.address(), 5s);
    expect_every_style_answers(200, "abcdef");
}

TEST_P(gateway_timeout_test, an_upstream_past_the_response_timeout_is_504) {
    fake_upstream up([](upstream_conn& c) {
        while (c.read_request()) {
            (void)c.wait_closed(5s); // never answers
        }
    });
    start_gateway(up.address(), 400ms);
    expect_every_style_answers(504, nullptr);
}

SLUICE_BACKEND_SUITE(gateway_timeout_test);

} // namespace
} // namespace sluice::test
