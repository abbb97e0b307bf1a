// sluice::client's pool figures on its own loop, against scripted upstreams on 127.0.0.1:
// idle connections, calls pending a connection, and failures counted by kind (client_stats).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/client.h>

#include "support/deadline.h"
#include "support/fake_upstream.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

/// Counts the callbacks of callback-style calls, for the test thread.
struct done_count {
    std::atomic<int> ok{0};
    std::atomic<int> failed{0};
    client_callback callback() {
        return [this](result<client_response> r) { ++(r ? ok : failed); };
    }
    int total() const noexcept { return ok.load() + failed.load(); }
};

/// A port on 127.0.0.1 that nothing listens on (bound, then closed): a connect is refused.
std::uint16_t closed_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        return 0;
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

/// A listener that never accepts, its backlog filled: a further connect hangs (SYNs are
/// dropped while net.ipv4.tcp_abort_on_overflow = 0, the default).
class full_backlog {
public:
    full_backlog() {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 0) != 0 ||
            ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            return;
        }
        port_ = ntohs(a.sin_port);
        for (int i = 0; i < 4; ++i) {
            const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            (void)::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
            fillers_.push_back(f);
        }
    }
    ~full_backlog() {
        for (int f : fillers_) {
            ::close(f);
        }
        ::close(lfd_);
    }
    full_backlog(const full_backlog&) = delete;
    full_backlog& operator=(const full_backlog&) = delete;
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

private:
    int lfd_ = -1;
    std::uint16_t port_ = 0;
    std::vector<int> fillers_;
};

std::uint64_t sum_of_kinds(const client_stats& s) {
    return std::accumulate(s.failed_by_kind.begin(), s.failed_by_kind.end(), std::uint64_t{0});
}

TEST(client_stats, idle_counts_a_kept_alive_connection_until_it_closes) {
    std::atomic<bool> hang_up{false};
    fake_upstream up([&](upstream_conn& c) {
        if (c.read_request() && c.write(upstream_response(200, "ok"))) {
            (void)wait_until([&] { return hang_up.load(); });
        }
    });
    client cl(upstream({up.address()}));
    EXPECT_EQ(cl.stats().idle, 0u);
    ASSERT_TRUE(cl.send_blocking({.target = "/"}));
    EXPECT_TRUE(wait_until([&] { return cl.stats().idle == 1; })) << "the connection went back to the pool";
    EXPECT_EQ(cl.stats().open, 1u);
    hang_up = true; // the upstream closes the pooled connection (its keep-alive timeout)
    EXPECT_TRUE(wait_until([&] { return cl.stats().open == 0; }));
    EXPECT_EQ(cl.stats().idle, 0u);
}

TEST(client_stats, a_reused_connection_is_not_idle_while_it_serves_a_call) {
    std::atomic<int> requests{0};
    std::atomic<bool> release{false};
    fake_upstream up([&](upstream_conn& c) {
        while (c.read_request()) {
            if (++requests == 2) {
                (void)wait_until([&] { return release.load(); });
            }
            if (!c.write(upstream_response(200, "ok"))) {
                return;
            }
        }
    });
    client cl(upstream({up.address()}));
    ASSERT_TRUE(cl.send_blocking({.target = "/"}));
    ASSERT_TRUE(wait_until([&] { return cl.stats().idle == 1; }));
    done_count done;
    cl.send(executor{}, {.target = "/"}, done.callback());
    ASSERT_TRUE(wait_until([&] { return requests.load() == 2; }));
    EXPECT_EQ(cl.stats().idle, 0u) << "taken from the pool";
    EXPECT_EQ(cl.stats().open, 1u);
    release = true;
    ASSERT_TRUE(wait_until([&] { return done.ok.load() == 1; }));
    EXPECT_TRUE(wait_until([&] { return cl.stats().idle == 1; }));
    EXPECT_EQ(cl.stats().reused, 1u);
}

TEST(client_stats, pending_counts_calls_waiting_beyond_max_connections) {
    std::atomic<bool> release{false};
    fake_upstream up([&](upstream_conn& c) {
        while (c.read_request()) {
            (void)wait_until([&] { return release.load(); }); // the first call holds the connection
            if (!c.write(upstream_response(200, "ok"))) {
                return;
            }
        }
    });
    client cl(upstream({up.address()}), {.max_connections = 1});
    done_count done;
    for (int i = 0; i < 3; ++i) {
        cl.send(executor{}, {.target = "/"}, done.callback());
    }
    // One call on the one connection, two queued for it.
    EXPECT_TRUE(wait_until([&] { return up.accepted() == 1 && cl.stats().pending == 2; }))
        << "pending " << cl.stats().pending;
    EXPECT_EQ(cl.stats().open, 1u);
    EXPECT_EQ(cl.stats().idle, 0u);
    release = true;
    ASSERT_TRUE(wait_until([&] { return done.total() == 3; }));
    EXPECT_EQ(done.ok.load(), 3);
    EXPECT_EQ(cl.stats().pending, 0u);
    EXPECT_TRUE(wait_until([&] { return cl.stats().idle == 1; }));
    EXPECT_EQ(up.accepted(), 1);
}

TEST(client_stats, a_call_whose_connection_is_opening_is_pending_until_connect_times_out) {
    full_backlog hang;
    client cl(upstream({hang.address()}), {.connect_timeout = 1500ms});
    done_count done;
    cl.send(executor{}, {.target = "/"}, done.callback());
    EXPECT_TRUE(wait_until([&] { return cl.stats().pending == 1; }, 1s)) << "pending " << cl.stats().pending;
    ASSERT_TRUE(wait_until([&] { return done.failed.load() == 1; }));
    const client_stats s = cl.stats();
    EXPECT_EQ(s.pending, 0u);
    EXPECT_EQ(s.failures(client_errc::connect_timed_out), 1u);
    EXPECT_EQ(s.failed, 1u);
    EXPECT_EQ(sum_of_kinds(s), s.failed);
}

TEST(client_stats, failures_are_counted_by_kind) {
    const std::uint16_t port = closed_port();
    ASSERT_NE(port, 0);
    client down(upstream({"127.0.0.1:" + std::to_string(port)}));
    for (int i = 0; i < 2; ++i) {
        auto r = down.send_blocking({.target = "/"});
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), client_errc::refused);
    }
    EXPECT_EQ(down.stats().failures(client_errc::refused), 2u);
    EXPECT_EQ(down.stats().failed, 2u);

    fake_upstream silent([](upstream_conn& c) {
        if (c.read_request()) {
            (void)c.wait_closed(5s); // never answers
        }
    });
    client cl(upstream({silent.address()}), {.response_timeout = 100ms});
    auto timed_out = cl.send_blocking({.target = "/"});
    ASSERT_FALSE(timed_out);
    EXPECT_EQ(timed_out.error(), client_errc::response_timed_out);
    auto invalid = cl.send_blocking({.target = "no-slash"});
    ASSERT_FALSE(invalid);
    EXPECT_EQ(invalid.error(), client_errc::invalid_request);
    std::promise<result<client_response>> p;
    auto f = p.get_future();
    client_call call = cl.send(executor{}, {.target = "/hold"},
                               [&p](result<client_response> r) { p.set_value(std::move(r)); });
    ASSERT_TRUE(wait_until([&] { return silent.accepted() == 2; }));
    EXPECT_TRUE(call.cancel());
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get().error(), client_errc::cancelled);

    const client_stats s = cl.stats();
    EXPECT_EQ(s.failures(client_errc::response_timed_out), 1u);
    EXPECT_EQ(s.failures(client_errc::invalid_request), 1u);
    EXPECT_EQ(s.failures(client_errc::cancelled), 1u);
    EXPECT_EQ(s.failures(client_errc::refused), 0u);
    EXPECT_EQ(s.failed, 3u);
    EXPECT_EQ(sum_of_kinds(s), s.failed) << "every failure has exactly one kind";
    EXPECT_EQ(s.pending, 0u);
}

TEST(client_stats, every_error_kind_has_a_stable_snake_case_name) {
    EXPECT_EQ(client_errc_name(client_errc::refused), "refused");
    EXPECT_EQ(client_errc_name(client_errc::connect_timed_out), "connect_timed_out");
    EXPECT_EQ(client_errc_name(client_errc::tls_certificate_rejected), "tls_certificate_rejected");
    for (std::size_t i = 1; i <= client_errc_count; ++i) {
        const std::string_view n = client_errc_name(static_cast<client_errc>(i));
        EXPECT_FALSE(n.empty()) << i;
        EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string_view::npos) << n;
    }
    EXPECT_EQ(client_errc_name(static_cast<client_errc>(client_errc_count + 1)), "")
        << "client_errc_count is the last error";
}

} // namespace
} // namespace sluice::test
