// The TLS decorator's client side over a real backend driver: how a paused owner hears the end
// of an upstream's stream (tls/tls_driver.h; backend.h rule 6).
//
// A bare FIN (no close_notify) is a cut: the owner must hear -ECONNRESET, after every byte of
// plaintext that came before it, and never a 0. A 0 reported while the owner is paused reads as
// a clean end to an owner that resumed before the completion reached it, and a close-delimited
// body cut short is then taken whole (the gateway_tls_stream_test failure of stop 22's TSan
// run). A close_notify is a clean end: a paused owner may hear 0 at once, and when it receives
// again it gets the rest of the bytes, then 0.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
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

enum class ending { bare_fin, close_notify };

struct what_the_owner_heard {
    std::string bytes;
    std::vector<std::int32_t> ends; // results of recv completions with more == false and no data
};

class client_cut : public ::testing::TestWithParam<const char*> {
protected:
    // The upstream sends `head`, waits until the owner has paused, sends `tail_bytes` more and
    // ends as told. Fills what the owner heard while paused, and after it received again.
    void run(ending how, std::size_t tail_bytes, what_the_owner_heard& paused,
             what_the_owner_heard& resumed) {
        const std::string head(1000, 'h');
        const std::string tail(tail_bytes, 't');
        std::atomic<bool> owner_paused{false};
        std::atomic<bool> ended{false};
        fake_upstream up([&](upstream_conn& c) {
            upstream_tls t(c);
            if (!t.ok() || !t.write(head)) {
                return;
            }
            const auto until = std::chrono::steady_clock::now() + 10s;
            while (!owner_paused.load() && std::chrono::steady_clock::now() < until) {
                std::this_thread::sleep_for(1ms);
            }
            if (!tail.empty()) {
                (void)t.write(tail);
            }
            if (how == ending::bare_fin) {
                t.bare_fin();
            } else {
                t.close_notify();
            }
            ended = true;
            (void)c.wait_closed(10s);
        });

        tls_client_rig rig(GetParam(), up);
        ASSERT_TRUE(rig.ok());
        detail::tls_driver& d = rig.driver();
        const int fd = rig.fd();
        void* const owner = rig.owner();
        what_the_owner_heard* heard = nullptr;
        // Pumps the driver until `done` or the deadline; collects what reaches the owner.
        const auto pump = [&](auto done, std::chrono::milliseconds budget) {
            rig.pump(done, budget, [&](const io::completion& c) {
                if (c.kind == io::op::recv && heard != nullptr) {
                    if (c.result > 0) {
                        heard->bytes.append(c.data, static_cast<std::size_t>(c.result));
                    } else if (!c.more && c.result != -ECANCELED) {
                        heard->ends.push_back(c.result);
                    }
                }
            });
        };

        pump([&] { return rig.connected; }, 10s);
        ASSERT_TRUE(rig.connected);
        what_the_owner_heard first;
        heard = &first;
        ASSERT_EQ(d.recv(fd, owner), 0);
        pump([&] { return first.bytes.size() >= head.size(); }, 10s);
        ASSERT_EQ(first.bytes, head);

        // Paused: the tail and the end arrive meanwhile; what a paused owner hears is kept apart.
        heard = &paused;
        d.pause_recv(fd, owner);
        owner_paused = true;
        pump([&] { return ended.load(); }, 10s);
        ASSERT_TRUE(ended.load());
        pump([] { return false; }, 300ms); // the FIN reaches the socket; the decorator sees it

        heard = &resumed;
        ASSERT_EQ(d.recv(fd, owner), 0);
        pump([&] { return !resumed.ends.empty(); }, 10s);
        heard = nullptr;
        d.close(fd, owner);
        pump([&] { return rig.closed; }, 10s);
        ASSERT_TRUE(rig.closed);
    }
};

// Tail 0 is the case of the CI failure: the whole body was in, the owner paused (the downstream
// was slower), then the FIN came, with nothing left to read: a cut at once. Tail 3000: ciphertext
// still unread before the FIN; the bytes first, then the reset.
TEST_P(client_cut, a_bare_fin_reaches_a_paused_owner_as_a_reset_after_the_bytes_when_it_receives) {
    for (const std::size_t tail : {std::size_t{0}, std::size_t{3000}}) {
        what_the_owner_heard paused;
        what_the_owner_heard resumed;
        run(ending::bare_fin, tail, paused, resumed);
        EXPECT_TRUE(paused.ends.empty())
            << "tail " << tail << ": a paused owner heard " << ::testing::PrintToString(paused.ends);
        EXPECT_EQ(paused.bytes.size() + resumed.bytes.size(), tail);
        EXPECT_EQ(resumed.ends, std::vector<std::int32_t>{-ECONNRESET}) << "tail " << tail;
    }
}

TEST_P(client_cut, a_close_notify_is_a_clean_end_after_the_bytes) {
    for (const std::size_t tail : {std::size_t{0}, std::size_t{3000}}) {
        what_the_owner_heard paused;
        what_the_owner_heard resumed;
        run(ending::close_notify, tail, paused, resumed);
        for (const std::int32_t r : paused.ends) {
            EXPECT_EQ(r, 0) << "tail " << tail
                            << ": a paused owner hears a clean end as a hang-up, if at all";
        }
        EXPECT_EQ(paused.bytes.size() + resumed.bytes.size(), tail);
        EXPECT_EQ(resumed.ends, std::vector<std::int32_t>{0}) << "tail " << tail;
    }
}

INSTANTIATE_TEST_SUITE_P(backends, client_cut, ::testing::Values("epoll", "uring"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

} // namespace
} // namespace sluice::test
