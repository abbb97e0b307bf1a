// An upstream may answer before it has read the whole request (a 413 to a large upload). The
// send of the request's body may then still be in flight, and on io_uring the kernel reads
// its memory until that send completes, after the connection's close too. A borrowed body
// (client_request::body_view) is the caller's to free once its callback has run, so the
// callback must not run before the send has ended: else the upstream could receive, as the
// rest of the body, whatever the freed memory holds next.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "client/client_call.h"
#include "client/client_pool.h"
#include "client/upstream.h"
#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::testing {
namespace {

TEST(client_early_answer, a_borrowed_body_is_not_handed_back_while_its_send_may_still_read_it) {
    auto drv = std::make_unique<fake_driver>();
    fake_driver* d = drv.get();
    d->connects = true;
    d->hold_sends = true; // the body's send is in flight until the close
    d->inbound_on_connect = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
    logger log(log_level::error);
    detail::loop l(std::move(drv), log, 0);
    detail::pool_config cfg;
    cfg.upstream =
        std::make_shared<detail::upstream_state>(std::vector<std::string>{"127.0.0.1:9"}, upstream_options{});
    cfg.counters = std::make_shared<detail::client_counters>();
    auto pool = std::make_shared<detail::client_pool>(l, std::move(cfg));

    std::string body(64 * 1024, 'b');
    const std::string original = body;
    int status = 0;
    bool sent_when_answered = false;
    client_request req;
    req.method = "POST";
    req.target = "/upload";
    req.body_view = body;
    auto call = std::make_shared<detail::client_call_state>(std::move(req), [&](result<client_response> r) {
        status = r ? r->status : -1;
        for (const auto& [fd, p] : d->peers) {
            sent_when_answered = sent_when_answered || !p.outbound.empty();
        }
        std::fill(body.begin(), body.end(), 'X'); // the caller frees the body: its memory is reused
    });
    pool->submit(call);
    l.run(detail::loop::run_mode::until_idle);

    EXPECT_EQ(status, 413) << "the early answer is the call's outcome";
    EXPECT_TRUE(sent_when_answered) << "the callback ran while the body's send could still read it";
    std::string out;
    for (const auto& [fd, p] : d->peers) {
        out += p.outbound;
    }
    const std::size_t head_end = out.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << "no request went out";
    EXPECT_EQ(out.substr(head_end + 4), original) << "the upstream received memory the caller had reused";
    pool->shutdown();
}

} // namespace
} // namespace sluice::testing
