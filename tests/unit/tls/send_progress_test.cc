// The TLS decorator reports a send's progress as its ciphertext goes out, not only when all of
// it has (tls/tls_driver.h). It encrypts up to 256 KiB of an owner's send at a time; if the
// owner heard 0 until all of that was with the kernel, its no-progress write deadline
// (limits.write_timeout_ms, 30 s) would see nothing from a peer reading below 256 KiB per
// timeout (~8.7 KB/s) and cut a reader that limits.min_send_rate (1,024 B/s) promises to
// serve; plaintext reports each partial send. Over a real backend driver, with the socket
// buffers pinned small so that the 256 KiB go out in many partial sends to a peer that reads
// a few KiB at a time: the owner hears many positive reports, they add up to what it sent,
// each resend from its own offset (as connection.cc does) carries on where the last left off,
// and the peer reads exactly the bytes sent.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <sluice/backend.h>

#include "support/fake_upstream.h"
#include "tls/tls_driver.h"
#include "unit/tls/tls_client_rig.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t payload_bytes = std::size_t{256} * 1024; // one encryption batch of the decorator
constexpr int small_buffer = 8 * 1024;                         // the kernel doubles it

std::string patterned(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = static_cast<char>('a' + (i * 7 + i / 4099) % 26);
    }
    return s;
}

class send_progress : public ::testing::TestWithParam<const char*> {};

TEST_P(send_progress, a_slow_peer_s_reading_is_reported_as_it_goes) {
    const std::string payload = patterned(payload_bytes);
    std::string received;
    std::atomic<bool> read_all{false};
    fake_upstream up([&](upstream_conn& c) {
        (void)::setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small_buffer, sizeof small_buffer);
        upstream_tls t(c);
        if (!t.ok()) {
            return;
        }
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (received.size() < payload.size() && std::chrono::steady_clock::now() < until) {
            const std::string got = t.read_some(2048);
            if (got.empty()) {
                return;
            }
            received += got;
            std::this_thread::sleep_for(1ms);
        }
        read_all = true;
        (void)c.wait_closed(10s);
    });

    tls_client_rig rig(GetParam(), up, small_buffer);
    ASSERT_TRUE(rig.ok());
    detail::tls_driver& d = rig.driver();
    const int fd = rig.fd();
    void* const owner = rig.owner();
    bool send_reported = false;
    std::int32_t send_result = 0;
    const auto pump = [&](auto done, std::chrono::milliseconds budget) {
        rig.pump(done, budget, [&](const io::completion& c) {
            if (c.kind == io::op::send) {
                send_reported = true;
                send_result = c.result;
            }
        });
    };
    pump([&] { return rig.connected; }, 10s);
    ASSERT_TRUE(rig.connected);

    // The owner's loop: send the rest from its offset, wait for the report, add it up.
    std::size_t off = 0;
    int positive_reports = 0;
    int sends = 0;
    const auto until = std::chrono::steady_clock::now() + 20s;
    iovec iov{};
    while (off < payload.size() && std::chrono::steady_clock::now() < until) {
        iov = {const_cast<char*>(payload.data()) + off, payload.size() - off};
        ASSERT_EQ(d.send(fd, &iov, 1, owner), 0);
        ++sends;
        send_reported = false;
        pump([&] { return send_reported; }, 10s);
        ASSERT_TRUE(send_reported) << "no send completion within 10 s, at offset " << off;
        ASSERT_GE(send_result, 0);
        ASSERT_LE(static_cast<std::size_t>(send_result), payload.size() - off);
        off += static_cast<std::size_t>(send_result);
        positive_reports += send_result > 0 ? 1 : 0;
    }
    EXPECT_EQ(off, payload.size());
    // 256 KiB through ~32 KiB of kernel buffers (both ends pinned) read 2 KiB at a time: several
    // partial sends, and most of them must say how far it got. One positive report would mean
    // progress was hidden until the end.
    EXPECT_GE(sends, 4) << "the buffers did not hold the send back: nothing was tested";
    EXPECT_GE(positive_reports * 2, sends)
        << positive_reports << " of " << sends << " sends reported progress";
    pump([&] { return read_all.load(); }, 20s);
    ASSERT_TRUE(read_all.load()) << "the peer did not read it all within 20 s";
    EXPECT_TRUE(received == payload) << "the peer read " << received.size() << " bytes, not the "
                                     << payload.size() << " sent (or other ones)";
    d.close(fd, owner);
    pump([&] { return rig.closed; }, 10s);
    EXPECT_TRUE(rig.closed);
}

INSTANTIATE_TEST_SUITE_P(backends, send_progress, ::testing::Values("epoll", "uring"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

} // namespace
} // namespace sluice::test
