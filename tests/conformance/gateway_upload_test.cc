// The gateway's asynchronous styles forward the request body without a copy (moved into the
// upstream call, exchange::take_body) on every backend × dispatch mode. The hard case: the
// downstream client leaves while the upload to the upstream is still going out (the upstream
// reads slowly), so the exchange ends and its request slot is recycled while a send of the
// body may be in flight. Under ASan a body still owned by the exchange would be read after
// reuse; here the call owns it. Then the next uploads on the same loop arrive byte-exact.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <sluice/client.h>

#include "gateway.h"
#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t upload_bytes = std::size_t{8} << 20;

std::uint64_t fnv1a64(std::string_view s) {
    std::uint64_t h = 1469598103934665603ull;
    for (const char c : s) {
        h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
    return h;
}

std::string post_request(std::string_view target, const std::string& body) {
    return "POST " + std::string(target) +
           " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

class gateway_upload_test : public backend_test {
protected:
    void SetUp() override {
        backend_test::SetUp();
        if (IsSkipped()) {
            return;
        }
        srv().config().limits.max_body_bytes = std::size_t{16} << 20;
    }

    void start_gateway(const std::string& address) {
        gw_ = std::make_unique<::gateway::gateway>(upstream({address}), client_options{});
        for (auto& r : ::gateway::routes(*gw_)) {
            srv().route(r.method, r.path, std::move(r.h));
        }
        srv().start();
    }

    void TearDown() override {
        backend_test::TearDown();
        gw_.reset();
    }

    std::unique_ptr<::gateway::gateway> gw_;
};

TEST_P(gateway_upload_test, a_client_leaving_mid_upload_cancels_the_call_and_later_uploads_arrive_intact) {
    std::atomic<int> conns{0};
    std::atomic<int> stalled{0};  // first connections: read a little, then wait for the close
    std::atomic<int> cut_seen{0}; // ... and saw it
    std::atomic<int> answered{0};
    fake_upstream up([&](upstream_conn& c) {
        if (conns.fetch_add(1) < 3) {
            std::string buf(64 * 1024, '\0');
            const ssize_t n = ::recv(c.fd(), buf.data(), buf.size(), 0);
            if (n > 0) {
                ++stalled;
            }
            if (c.wait_closed(10s)) {
                ++cut_seen;
            }
            return;
        }
        while (auto req = c.read_request(10s)) {
            const std::string body = req->substr(req->find("\r\n\r\n") + 4);
            ++answered;
            if (!c.write(upstream_response(200, std::to_string(body.size()) + ":" +
                                                    std::to_string(fnv1a64(body))))) {
                return;
            }
        }
    });
    start_gateway(up.address());
    const char* styles[] = {"async", "resume", "co"};
    int k = 0;
    for (const char* style : styles) {
        ++k;
        test_client c(srv().port(), 10s);
        ASSERT_TRUE(
            c.send(post_request(std::string("/api/") + style + "/upload", std::string(upload_bytes, 'x'))))
            << c.error();
        // The upstream has part of the body; the rest is still going out when the client leaves.
        ASSERT_TRUE(wait_until([&] { return stalled.load() == k; }, 10s)) << style;
        c.close_abortive();
        ASSERT_TRUE(wait_until([&] { return cut_seen.load() == k; }, 10s))
            << style << ": upstream not closed";
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
    EXPECT_TRUE(wait_until([&] { return gw_->api.stats().open == 0; })) << gw_->api.stats().open;
    // The same loop, its recycled request slots: every byte of the next uploads arrives.
    for (const char* style : styles) {
        std::string body(upload_bytes, '\0');
        for (std::size_t i = 0; i < body.size(); ++i) {
            body[i] = static_cast<char>('A' + (i * 7 + static_cast<std::size_t>(style[0])) % 23);
        }
        test_client c(srv().port(), 20s);
        ASSERT_TRUE(c.send(post_request(std::string("/api/") + style + "/upload", body))) << c.error();
        auto r = c.read_response();
        ASSERT_TRUE(r) << style << " " << c.error();
        EXPECT_EQ(r->status, 200) << style << " " << r->body;
        EXPECT_EQ(r->body, std::to_string(body.size()) + ":" + std::to_string(fnv1a64(body))) << style;
    }
    EXPECT_EQ(answered.load(), 3);
}

SLUICE_BACKEND_SUITE(gateway_upload_test);

} // namespace
} // namespace sluice::test
