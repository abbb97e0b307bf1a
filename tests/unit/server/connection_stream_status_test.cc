// A streamed response whose status has no content (204, 304) and a handler's final 1xx, on
// the real connection over the in-memory driver: what the client reads is whole responses,
// so the pipelined request after them is answered intact. Found by tests/fuzz/http_server.
#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "fakes/fake_driver.h"
#include "loop/loop.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"

namespace sluice::testing {
namespace {

std::string answer(router routes, const std::string& requests) {
    config cfg;
    const logger log{log_level::error, [](log_level, std::string_view) {}};
    detail::server_context ctx{cfg, routes, log};
    auto d = std::make_unique<fake_driver>();
    fake_driver& drv = *d;
    drv.peers[100].inbound = requests;
    detail::loop loop{std::move(d), log, 0};
    detail::loop_context lc{loop, ctx};
    detail::adopt_connection(lc, 100, detail::listener_kind::plain);
    loop.run(detail::loop::run_mode::until_idle);
    return drv.peers[100].outbound;
}

const std::string pipelined = "GET /first HTTP/1.1\r\nHost: a\r\n\r\n"
                              "GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

router streaming(int status) {
    router r;
    r.add("GET", "/first", [status](exchange& ex) { ex.response().status(status).write("ignored"); });
    r.add("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
    return r;
}

// What follows the first response's head: it must be the next response, not chunk framing.
std::string after_first_head(const std::string& out) {
    const std::size_t end = out.find("\r\n\r\n");
    return end == std::string::npos ? std::string() : out.substr(end + 4);
}

TEST(connection_stream_status, a_streamed_204_or_304_sends_its_head_only) {
    for (const int status : {204, 304}) {
        const std::string out = answer(streaming(status), pipelined);
        SCOPED_TRACE(out);
        EXPECT_TRUE(out.starts_with("HTTP/1.1 " + std::to_string(status) + " ")) << status;
        EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << status;
        EXPECT_TRUE(after_first_head(out).starts_with("HTTP/1.1 200 OK\r\n")) << status;
        EXPECT_TRUE(out.ends_with("\r\n\r\nnext")) << status;
    }
}

TEST(connection_stream_status, a_handlers_final_1xx_is_sent_as_500) {
    for (const int status : {100, 102, 103, 199}) {
        router r;
        r.add("GET", "/first", [status](exchange& ex) { ex.response().status(status).text("x"); });
        r.add("GET", "/next", [](exchange& ex) { ex.response().text("next"); });
        const std::string out = answer(std::move(r), pipelined);
        SCOPED_TRACE(out);
        EXPECT_TRUE(out.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << status;
        EXPECT_TRUE(out.ends_with("\r\n\r\nnext")) << status;
        // streamed likewise: a 500 stream with the handler's bytes
        const std::string streamed = answer(streaming(status), pipelined);
        EXPECT_TRUE(streamed.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << status;
        EXPECT_NE(streamed.find("\r\n7\r\nignored\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"), std::string::npos)
            << streamed;
    }
}

// A status out of range goes out as 500, streamed too: with the body the handler wrote (the
// framing follows the status sent, not the one set). Found by tests/fuzz/http_server.
TEST(connection_stream_status, a_streamed_status_out_of_range_is_a_500_with_its_body) {
    for (const int status : {0, 99, 600}) {
        const std::string out = answer(streaming(status), pipelined);
        SCOPED_TRACE(out);
        EXPECT_TRUE(out.starts_with("HTTP/1.1 500 Internal Server Error\r\n")) << status;
        EXPECT_NE(out.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << status;
        EXPECT_NE(out.find("\r\n7\r\nignored\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"), std::string::npos) << status;
    }
}

} // namespace
} // namespace sluice::testing
