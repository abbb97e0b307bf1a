// The transport over the in-memory driver (STYLE.md rule 7): bytes delivered whole, in 3-byte
// pieces and one at a time, sends cut into 3-byte partial writes, and the N-th operation
// failing for every N. Whatever fails, the loop finishes, on_closed comes exactly once, one
// send reports at most once, and what went either way is a prefix of the truth.
#include <gtest/gtest.h>

#include <string>

#include "client/transport.h"
#include "fakes/fake_driver.h"
#include "loop/loop.h"

namespace sluice::testing {
namespace {

const std::string request_head = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
const std::string request_body = "hello";
const std::string inbound = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

struct recorder final : detail::transport_user {
    detail::loop* l = nullptr;
    detail::transport* t = nullptr;
    std::string data;
    int sent_reports = 0;
    int sent_result = 1;
    int peer_closed = 0;
    int closed = 0;

    void on_connected(int) noexcept override {}
    void on_data(std::string_view bytes) noexcept override { data.append(bytes); }
    // The stream ends once both directions are done (the peer may end before our send does).
    void on_peer_closed(int) noexcept override {
        ++peer_closed;
        if (sent_reports > 0 || !t->sending()) {
            t->close();
        }
    }
    void on_sent(int result) noexcept override {
        ++sent_reports;
        sent_result = result;
        if (result < 0 || peer_closed > 0) {
            t->close();
        }
    }
    void on_closed() noexcept override {
        ++closed;
        l->release();
    }
};

struct outcome {
    std::string outbound;
    recorder rec;
};

void run(std::size_t chunk, long fail_at, outcome& o) {
    auto drv = std::make_unique<fake_driver>();
    fake_driver* d = drv.get();
    d->chunk = chunk;
    d->send_limit = 3;
    d->fail_at = fail_at;
    d->peers[7].inbound = inbound;
    d->peers[7].eof_at_end = true;
    logger log(log_level::error);
    detail::loop l(std::move(drv), log, 0);
    detail::transport t(l, o.rec);
    o.rec.l = &l;
    o.rec.t = &t;
    l.retain();
    t.adopt(7);
    ASSERT_EQ(t.start_receiving(), 0);
    const iovec iov[2] = {{const_cast<char*>(request_head.data()), request_head.size()},
                          {const_cast<char*>(request_body.data()), request_body.size()}};
    ASSERT_EQ(t.send(iov, 2), 0);
    EXPECT_EQ(t.send(iov, 2), -EBUSY) << "one send at a time";
    l.run(detail::loop::run_mode::until_idle);
    o.outbound = d->peers[7].outbound;
}

TEST(transport, whole_split_and_one_byte_reads_with_partial_writes) {
    for (std::size_t chunk : {std::size_t(1000), std::size_t(3), std::size_t(1)}) {
        outcome o;
        run(chunk, -1, o);
        EXPECT_EQ(o.outbound, request_head + request_body) << chunk;
        EXPECT_EQ(o.rec.sent_reports, 1);
        EXPECT_EQ(o.rec.sent_result, 0);
        EXPECT_EQ(o.rec.data, inbound);
        EXPECT_EQ(o.rec.peer_closed, 1);
        EXPECT_EQ(o.rec.closed, 1);
    }
}

TEST(transport, nth_operation_failing) {
    for (std::size_t chunk : {std::size_t(3), std::size_t(1)}) {
        for (long n = 0; n < 80; ++n) {
            outcome o;
            run(chunk, n, o);
            const std::string expected_out = request_head + request_body;
            EXPECT_EQ(expected_out.compare(0, o.outbound.size(), o.outbound), 0) << chunk << " " << n;
            EXPECT_EQ(inbound.compare(0, o.rec.data.size(), o.rec.data), 0) << chunk << " " << n;
            EXPECT_LE(o.rec.sent_reports, 1) << chunk << " " << n;
            EXPECT_EQ(o.rec.closed, 1) << chunk << " " << n;
        }
    }
}

} // namespace
} // namespace sluice::testing

namespace sluice::testing {
namespace {

TEST(transport, a_send_reported_as_zero_may_have_written_bytes) {
    // Over TLS a partial inner send is reported as 0 while its bytes are on the wire: the
    // retry rule's "nothing of the request was written" must not be read from the count of
    // reported bytes alone (a POST whose body went out was retried once on that reading).
    auto drv = std::make_unique<fake_driver>();
    fake_driver* d = drv.get();
    d->send_limit = 3;
    d->zero_reports = 1;
    logger log(log_level::error);
    detail::loop l(std::move(drv), log, 0);
    recorder rec;
    detail::transport t(l, rec);
    rec.l = &l;
    rec.t = &t;
    l.retain();
    t.adopt(7);
    EXPECT_FALSE(t.may_have_written());
    const iovec iov[1] = {{const_cast<char*>(request_head.data()), request_head.size()}};
    ASSERT_EQ(t.send(iov, 1), 0);
    l.run(detail::loop::run_mode::until_idle);
    EXPECT_EQ(rec.sent_reports, 1);
    EXPECT_LT(rec.sent_result, 0) << "the send after the 0 report fails";
    EXPECT_EQ(d->peers[7].outbound, request_head.substr(0, 3)) << "3 bytes went out";
    EXPECT_EQ(t.bytes_sent(), 0U);
    EXPECT_TRUE(t.may_have_written());
}

} // namespace
} // namespace sluice::testing
