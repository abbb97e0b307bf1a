// The io_uring driver against the numbered rules of backend.h, once per feature set: all
// probed features, then each fallback forced on its own (probe.h's table), so the paths a
// newer kernel never takes still run here. Real loopback sockets; the test thread creates
// and drives the driver, as a loop thread does (SINGLE_ISSUER).
#if __has_include(<liburing.h>)

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sluice/backend.h>

#include "../../../backends/uring/uring_driver.h"

namespace sluice::io::uring {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct feature_case {
    const char* name;
    features allowed;
};

features without(bool features::*member) {
    features f;
    f.*member = false;
    return f;
}

features plain_ring() {
    features f;
    f.single_issuer = false;
    f.coop_taskrun = false;
    return f;
}

const feature_case feature_cases[] = {
    {"all", features{}},
    {"no_defer_taskrun", without(&features::single_issuer)},
    {"no_taskrun_flags", plain_ring()},
    {"no_multishot_accept", without(&features::multishot_accept)},
    {"no_multishot_recv", without(&features::multishot_recv)},
    {"no_buffer_ring", without(&features::buffer_ring)},
    {"no_multishot_poll", without(&features::multishot_poll)},
    {"no_cancel_fd", without(&features::cancel_fd_all)},
};

// What one owner has seen: the bytes received, and every completion in order.
struct owner_log {
    std::string bytes;
    std::vector<completion> seen;
    bool closed = false;
    bool after_close = false; // rule 4: nothing may follow op::close
    int closes = 0;
};

class uring_driver_test : public ::testing::TestWithParam<feature_case> {
protected:
    void SetUp() override {
        io::driver_options o;
        o.recv_buffer_bytes = 512; // small, so that exhaustion and multi-buffer reads happen
        o.recv_buffer_count = 8;
        std::string error;
        d_ = driver::create_with(o, GetParam().allowed, error);
        ASSERT_NE(d_, nullptr) << error;
        const features& a = d_->active();
        const features& want = GetParam().allowed;
        // A forced fallback is really in use.
        EXPECT_TRUE(a.single_issuer <= want.single_issuer && a.multishot_accept <= want.multishot_accept &&
                    a.multishot_recv <= want.multishot_recv && a.buffer_ring <= want.buffer_ring &&
                    a.multishot_poll <= want.multishot_poll && a.cancel_fd_all <= want.cancel_fd_all);
        listen_fd_ = listener(port_);
        ASSERT_GE(listen_fd_, 0);
    }
    void TearDown() override {
        if (d_ && listen_fd_ >= 0) {
            d_->close(listen_fd_, &listener_tag_);
            EXPECT_TRUE(pump([&] { return logs_[&listener_tag_].closed; }));
        }
        d_.reset();
        for (int fd : client_fds_) {
            ::close(fd);
        }
    }

    static int listener(std::uint16_t& port) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 512) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            return -1;
        }
        port = ntohs(a.sin_port);
        return fd;
    }

    sockaddr_in address() const {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port_);
        return a;
    }

    int client() {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const sockaddr_in a = address();
        EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
        client_fds_.push_back(fd);
        return fd;
    }

    void drop_client(int fd) {
        std::erase(client_fds_, fd);
        ::close(fd);
    }

    // Runs wait() until pred holds (or 5 s), logging every completion under its owner and
    // releasing each buffer right after, as the core does (rule 5).
    bool pump(const std::function<bool()>& pred, std::chrono::milliseconds bound = 5000ms) {
        const auto end = steady::now() + bound;
        std::vector<completion> cs;
        while (!pred()) {
            if (steady::now() > end) {
                return false;
            }
            cs.clear();
            const int n = d_->wait(10ms, cs);
            EXPECT_GE(n, 0);
            for (const completion& c : cs) {
                owner_log& l = logs_[c.owner];
                if (l.closed) {
                    l.after_close = true;
                }
                l.seen.push_back(c);
                if (c.kind == op::recv && c.result > 0) {
                    l.bytes.append(c.data, static_cast<std::size_t>(c.result));
                }
                if (c.kind == op::close) {
                    l.closed = true;
                    ++l.closes;
                }
                if (c.kind == op::accept && c.result >= 0) {
                    accepted_.push_back(c.result);
                }
                if (on_completion_) {
                    on_completion_(c);
                }
                if (c.buffer != no_buffer) {
                    d_->release(c.buffer);
                }
            }
        }
        return true;
    }

    // Accepts one connection from a new client; returns {server fd, client fd}.
    std::pair<int, int> connected_pair() {
        if (!accepting_) {
            EXPECT_EQ(d_->accept(listen_fd_, &listener_tag_), 0);
            accepting_ = true;
        }
        const std::size_t before = accepted_.size();
        const int c = client();
        EXPECT_TRUE(pump([&] { return accepted_.size() > before; }));
        return {accepted_.empty() ? -1 : accepted_.back(), c};
    }

    static const completion* last_of(const owner_log& l, op kind) {
        for (auto it = l.seen.rbegin(); it != l.seen.rend(); ++it) {
            if (it->kind == kind) {
                return &*it;
            }
        }
        return nullptr;
    }
    static bool ended(const owner_log& l) {
        const completion* c = last_of(l, op::recv);
        return c != nullptr && !c->more;
    }

    std::unique_ptr<driver> d_;
    int listen_fd_ = -1;
    std::uint16_t port_ = 0;
    bool accepting_ = false;
    int listener_tag_ = 0;
    std::map<void*, owner_log> logs_;
    std::vector<int> accepted_;
    std::vector<int> client_fds_;
    std::function<void(const completion&)> on_completion_;
};

std::string read_exactly(int fd, std::size_t n) {
    std::string out;
    char buf[65536];
    while (out.size() < n) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0) {
            break;
        }
        const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
        if (r <= 0) {
            break;
        }
        out.append(buf, static_cast<std::size_t>(r));
    }
    return out;
}

TEST_P(uring_driver_test, accept_receive_send_and_close) {
    auto [s, c] = connected_pair();
    ASSERT_GE(s, 0);
    const completion* acc = last_of(logs_[&listener_tag_], op::accept);
    ASSERT_NE(acc, nullptr);
    EXPECT_TRUE(acc->more); // accepting stays armed
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    ASSERT_EQ(::send(c, "hello", 5, 0), 5);
    ASSERT_TRUE(pump([&] { return logs_[&owner].bytes == "hello"; }));
    EXPECT_TRUE(logs_[&owner].seen.back().more);

    const std::string reply = "world";
    iovec iov{const_cast<char*>(reply.data()), reply.size()};
    ASSERT_EQ(d_->send(s, &iov, 1, &owner), 0);
    ASSERT_TRUE(pump([&] { return last_of(logs_[&owner], op::send) != nullptr; }));
    EXPECT_EQ(last_of(logs_[&owner], op::send)->result, 5);
    EXPECT_EQ(read_exactly(c, 5), "world");

    ::shutdown(c, SHUT_WR); // end of stream: a final recv of 0
    ASSERT_TRUE(pump([&] { return ended(logs_[&owner]); }));
    EXPECT_EQ(last_of(logs_[&owner], op::recv)->result, 0);

    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
    pump([] { return false; }, 50ms);
    EXPECT_EQ(logs_[&owner].closes, 1);
    EXPECT_FALSE(logs_[&owner].after_close);
}

TEST_P(uring_driver_test, large_input_through_a_small_pool_arrives_whole_and_in_order) {
    auto [s, c] = connected_pair();
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    std::string big(1 << 20, '\0');
    for (std::size_t i = 0; i < big.size(); ++i) {
        big[i] = static_cast<char>('a' + (i * 7919) % 26);
    }
    std::thread writer([&, c = c] {
        std::size_t off = 0;
        while (off < big.size()) {
            const ssize_t n = ::send(c, big.data() + off, big.size() - off, 0);
            if (n <= 0) {
                break;
            }
            off += static_cast<std::size_t>(n);
        }
    });
    const bool all = pump([&] { return logs_[&owner].bytes.size() >= big.size(); }, 10000ms);
    writer.join();
    ASSERT_TRUE(all) << logs_[&owner].bytes.size() << " of " << big.size();
    EXPECT_TRUE(logs_[&owner].bytes == big);
    for (const completion& x : logs_[&owner].seen) {
        EXPECT_TRUE(x.more) << "receiving stopped: " << x.result; // exhaustion is not the core's business
    }
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
}

TEST_P(uring_driver_test, paused_receiver_still_hears_the_peer_leave) {
    auto [s, c] = connected_pair();
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    ASSERT_EQ(::send(c, "one", 3, 0), 3);
    ASSERT_TRUE(pump([&] { return logs_[&owner].bytes == "one"; }));
    d_->pause_recv(s, &owner);
    ASSERT_TRUE(pump([&] { return ended(logs_[&owner]); })); // the pause's final completion
    const std::size_t after_pause = logs_[&owner].seen.size();
    ASSERT_EQ(::send(c, "two", 3, 0), 3);
    pump([] { return false; }, 50ms);
    EXPECT_EQ(logs_[&owner].seen.size(), after_pause) << "data delivered while paused";

    ::shutdown(c, SHUT_WR); // the peer leaves (FIN) with bytes still unread: rule 6
    ASSERT_TRUE(pump([&] { return logs_[&owner].seen.size() > after_pause; }));
    const completion& hup = logs_[&owner].seen.back();
    EXPECT_EQ(hup.kind, op::recv);
    EXPECT_FALSE(hup.more);
    EXPECT_LE(hup.result, 0);
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
    EXPECT_EQ(logs_[&owner].closes, 1);
}

TEST_P(uring_driver_test, a_reset_peer_is_heard_while_paused) {
    auto [s, c] = connected_pair();
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    d_->pause_recv(s, &owner);
    ASSERT_TRUE(pump([&] { return ended(logs_[&owner]); }));
    const std::size_t after_pause = logs_[&owner].seen.size();
    linger lg{1, 0};
    ::setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    drop_client(c); // RST
    ASSERT_TRUE(pump([&] { return logs_[&owner].seen.size() > after_pause; }));
    EXPECT_FALSE(logs_[&owner].seen.back().more);
    EXPECT_LE(logs_[&owner].seen.back().result, 0);
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
}

TEST_P(uring_driver_test, resumed_receiver_gets_what_arrived_while_paused) {
    auto [s, c] = connected_pair();
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    d_->pause_recv(s, &owner);
    ASSERT_TRUE(pump([&] { return ended(logs_[&owner]); }));
    ASSERT_EQ(::send(c, "later", 5, 0), 5);
    pump([] { return false; }, 30ms);
    ASSERT_EQ(d_->recv(s, &owner), 0);
    ASSERT_TRUE(pump([&] { return logs_[&owner].bytes == "later"; }));
    EXPECT_TRUE(logs_[&owner].seen.back().more);
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
}

TEST_P(uring_driver_test, close_with_operations_in_flight_reports_close_once_and_last) {
    auto [s, c] = connected_pair();
    int owner = 0;
    ASSERT_EQ(d_->recv(s, &owner), 0);
    // A send that cannot finish: the client reads nothing, so it parks in the kernel.
    int small = 4096;
    ::setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    std::string blob(8 << 20, 'x');
    iovec iov{blob.data(), blob.size()};
    ASSERT_EQ(d_->send(s, &iov, 1, &owner), 0);
    pump([&] { return last_of(logs_[&owner], op::send) != nullptr; }, 100ms);
    if (const completion* first = last_of(logs_[&owner], op::send)) {
        // A partial send came back; send the rest, which parks.
        const auto done = static_cast<std::size_t>(first->result);
        iov = {blob.data() + done, blob.size() - done};
        ASSERT_EQ(d_->send(s, &iov, 1, &owner), 0);
        pump([] { return false; }, 20ms);
    }
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
    pump([] { return false; }, 50ms);
    EXPECT_EQ(logs_[&owner].closes, 1);
    EXPECT_FALSE(logs_[&owner].after_close);
    EXPECT_EQ(logs_[&owner].seen.back().kind, op::close);
}

TEST_P(uring_driver_test, head_and_body_go_out_in_one_sendmsg) {
    auto [s, c] = connected_pair();
    int owner = 0;
    std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n";
    std::string body = "body";
    iovec iov[2] = {{head.data(), head.size()}, {body.data(), body.size()}};
    ASSERT_EQ(d_->send(s, iov, 2, &owner), 0);
    ASSERT_TRUE(pump([&] { return last_of(logs_[&owner], op::send) != nullptr; }));
    EXPECT_EQ(last_of(logs_[&owner], op::send)->result, static_cast<int>(head.size() + body.size()));
    EXPECT_EQ(read_exactly(c, head.size() + body.size()), head + body);
    EXPECT_EQ(d_->send(s, iov, 2, &owner), 0);
    EXPECT_EQ(d_->send(s, iov, 2, &owner), -EBUSY); // rule 7: one send per fd at a time
    d_->close(s, &owner);
    ASSERT_TRUE(pump([&] { return logs_[&owner].closed; }));
}

TEST_P(uring_driver_test, connect_succeeds_and_fails_with_errno) {
    ASSERT_EQ(d_->accept(listen_fd_, &listener_tag_), 0);
    accepting_ = true;
    int ok_owner = 0;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const sockaddr_in a = address();
    ASSERT_EQ(d_->connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a, &ok_owner), 0);
    ASSERT_TRUE(
        pump([&] { return last_of(logs_[&ok_owner], op::connect) != nullptr && !accepted_.empty(); }));
    EXPECT_EQ(last_of(logs_[&ok_owner], op::connect)->result, 0);
    d_->close(fd, &ok_owner);
    ASSERT_TRUE(pump([&] { return logs_[&ok_owner].closed; }));

    std::uint16_t dead_port = 0;
    const int dead = listener(dead_port);
    ::close(dead); // nobody listens there now
    sockaddr_in b = address();
    b.sin_port = htons(dead_port);
    int bad_owner = 0;
    const int fd2 = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_EQ(d_->connect(fd2, reinterpret_cast<const sockaddr*>(&b), sizeof b, &bad_owner), 0);
    ASSERT_TRUE(pump([&] { return last_of(logs_[&bad_owner], op::connect) != nullptr; }));
    EXPECT_EQ(last_of(logs_[&bad_owner], op::connect)->result, -ECONNREFUSED);
    d_->close(fd2, &bad_owner);
    ASSERT_TRUE(pump([&] { return logs_[&bad_owner].closed; }));
    for (int x : accepted_) {
        ::close(x);
    }
}

TEST_P(uring_driver_test, wake_from_another_thread_ends_an_endless_wait) {
    std::vector<completion> cs;
    d_->wait(0ms, cs); // settle the start-up completions
    std::thread waker([&] {
        std::this_thread::sleep_for(50ms);
        d_->wake();
    });
    const auto t0 = steady::now();
    cs.clear();
    const int n = d_->wait(std::chrono::nanoseconds(-1), cs);
    const auto took = steady::now() - t0;
    waker.join();
    EXPECT_EQ(n, 0);
    EXPECT_LT(took, 2s);
    // A wake-up before the wait counts too ("or the next one").
    d_->wake();
    cs.clear();
    const auto t1 = steady::now();
    d_->wait(std::chrono::nanoseconds(-1), cs);
    EXPECT_LT(steady::now() - t1, 2s);
}

TEST_P(uring_driver_test, wait_times_out_on_the_ring) {
    std::vector<completion> cs;
    d_->wait(0ms, cs);
    cs.clear();
    const auto t0 = steady::now();
    EXPECT_EQ(d_->wait(30ms, cs), 0);
    const auto took = steady::now() - t0;
    EXPECT_GE(took, 25ms);
    EXPECT_LT(took, 1s);
}

TEST_P(uring_driver_test, many_connections_each_sending_at_once_are_all_heard) {
    // 200 connections against 8 buffers of 512 B, each sending 2 KB: the pool runs dry.
    ASSERT_EQ(d_->accept(listen_fd_, &listener_tag_), 0);
    accepting_ = true;
    constexpr int n = 200;
    std::vector<int> owners(n);
    std::map<int, int> owner_of_fd;
    on_completion_ = [&](const completion& c) {
        if (c.owner == &listener_tag_ && c.kind == op::accept && c.result >= 0) {
            const int k = static_cast<int>(owner_of_fd.size());
            owner_of_fd[c.result] = k;
            EXPECT_EQ(d_->recv(c.result, &owners[static_cast<std::size_t>(k)]), 0);
        }
    };
    std::vector<int> clients;
    for (int i = 0; i < n; ++i) {
        clients.push_back(client());
    }
    const std::string msg(2048, 'm');
    for (int fd : clients) {
        ASSERT_EQ(::send(fd, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
    }
    ASSERT_TRUE(pump([&] {
        for (int& o : owners) {
            if (logs_[&o].bytes.size() < msg.size()) {
                return false;
            }
        }
        return true;
    }));
    EXPECT_GT(d_->starved_receives(), 0u);
    for (auto [fd, k] : owner_of_fd) {
        d_->close(fd, &owners[static_cast<std::size_t>(k)]);
    }
    ASSERT_TRUE(pump([&] {
        for (int& o : owners) {
            if (!logs_[&o].closed) {
                return false;
            }
        }
        return true;
    }));
    for (int& o : owners) {
        EXPECT_EQ(logs_[&o].bytes, msg);
        EXPECT_EQ(logs_[&o].closes, 1);
        EXPECT_FALSE(logs_[&o].after_close);
    }
}

INSTANTIATE_TEST_SUITE_P(features, uring_driver_test, ::testing::ValuesIn(feature_cases),
                         [](const ::testing::TestParamInfo<feature_case>& i) {
                             return std::string(i.param.name);
                         });

} // namespace
} // namespace sluice::io::uring

#endif
