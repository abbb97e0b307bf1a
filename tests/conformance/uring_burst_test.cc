// The io_uring backend's fault test: its provided buffer ring runs dry under a burst of
// 5,000 connections that each send a request at once, and still every request is answered,
// none lost (backends/uring/uring_driver.h: a multishot receive that ends with -ENOBUFS is
// re-armed once buffers are back; the bytes wait in the socket meanwhile).
//
// Two levels:
//  - the driver alone, through the registry, with a deliberately tiny ring (8 buffers of
//    512 B against requests of ~1.6 KB, so every request needs several buffers and almost
//    every receive starves at least once), driven by a minimal responder that also checks
//    rule 4 of backend.h (one op::close per owner, nothing after it);
//  - the whole server (sluice::server, backend = uring) with its default ring (1,024
//    buffers), which the same burst outruns when it arrives while the loop is busy.
// The client is one thread with poll() over 5,000 sockets (support/multi_client.h); both
// sides fit the 20,000-descriptor limit of the test process.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <sluice/backend.h>
#include <sluice/exchange.h>
#include <sluice/log.h>

#include "support/backend_matrix.h"
#include "support/deadline.h"
#include "support/log_capture.h"
#include "support/multi_client.h"
#include "support/test_client.h"
#include "support/test_server.h"

namespace sluice::test {
namespace {

constexpr std::size_t burst_connections = 5000;
constexpr auto send_bound = 30s;
constexpr auto read_bound = 60s;

// "GET /i/<n>" with a padding header: about 1.6 KB, several of the driver test's buffers.
std::string burst_request(std::size_t n) {
    return "GET /i/" + std::to_string(n) + " HTTP/1.1\r\nHost: burst\r\nX-Pad: " + std::string(1500, 'p') +
           "\r\nConnection: close\r\n\r\n";
}

// Every connection got 200 with its own number back.
void expect_all_answered(const multi_client& mc) {
    std::size_t wrong = 0;
    std::size_t first_wrong = burst_connections;
    for (std::size_t i = 0; i < mc.size(); ++i) {
        const auto& r = mc.response(i);
        if (!r || r->status != 200 || r->body != std::to_string(i)) {
            if (wrong++ == 0) {
                first_wrong = i;
            }
        }
    }
    EXPECT_EQ(wrong, 0u) << "first wrong answer: connection " << first_wrong;
    EXPECT_EQ(mc.responses_received(), burst_connections);
}

int open_listener(std::uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, SOMAXCONN) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        return -1;
    }
    port = ntohs(addr.sin_port);
    return fd;
}

// A minimal HTTP responder over a bare driver: reads until the end of the head, answers with
// the number in the path, closes once it is sent. It runs on its own thread, which creates
// the driver (SINGLE_ISSUER ties a ring to its creator).
class bare_responder {
public:
    bare_responder(const io::backend& b, io::driver_options options, int listen_fd)
        : backend_(b), options_(options), listen_fd_(listen_fd) {}

    void start() {
        thread_ = std::thread([this] { run(); });
        ASSERT_TRUE(wait_until([&] { return started_.load(); }, 5s)) << "driver did not start";
        ASSERT_TRUE(create_error_.empty()) << create_error_;
    }
    void stop_and_join() {
        stop_ = true;
        if (thread_.joinable()) {
            thread_.join();
        }
    }
    std::size_t answered() const noexcept { return answered_.load(); }
    std::size_t violations() const noexcept { return violations_.load(); }
    std::size_t leaked() const noexcept { return leaked_.load(); }

private:
    struct conn {
        int fd;
        std::string in;
        std::string out;
        iovec iov{};
        bool responding = false;
        bool closing = false;
    };

    void run() {
        std::unique_ptr<io::driver> d = backend_.create(options_, create_error_);
        if (!d) {
            started_ = true;
            return;
        }
        int listener_tag = 0;
        if (const int rc = d->accept(listen_fd_, &listener_tag); rc < 0) {
            create_error_ = "accept: " + std::to_string(rc);
            started_ = true;
            return;
        }
        started_ = true;
        std::unordered_set<conn*> live;
        std::vector<io::completion> cs;
        bool listener_closed = false;
        bool closing_all = false;
        const auto deadline = test_clock::now() + read_bound + send_bound;
        while (!(closing_all && live.empty() && listener_closed) && test_clock::now() < deadline) {
            if (stop_ && !closing_all) {
                closing_all = true;
                d->close(listen_fd_, &listener_tag);
                for (conn* k : live) {
                    if (!k->closing) {
                        k->closing = true;
                        d->close(k->fd, k);
                    }
                }
            }
            cs.clear();
            d->wait(20ms, cs);
            for (const io::completion& c : cs) {
                if (c.owner == &listener_tag) {
                    if (c.kind == io::op::close) {
                        listener_closed = true;
                    } else if (c.kind == io::op::accept && c.result >= 0) {
                        auto* k = new conn{c.result, {}, {}, {}, false, false};
                        live.insert(k);
                        if (closing_all) {
                            k->closing = true;
                            d->close(k->fd, k);
                        } else if (d->recv(k->fd, k) < 0) {
                            k->closing = true;
                            d->close(k->fd, k);
                        }
                    }
                } else {
                    on_conn(*d, static_cast<conn*>(c.owner), c, live);
                }
                if (c.buffer != io::no_buffer) {
                    d->release(c.buffer); // rule 5: every lent buffer back before the next wait
                }
            }
        }
        leaked_ = live.size();
        for (conn* k : live) {
            delete k;
        }
    }

    void on_conn(io::driver& d, conn* k, const io::completion& c, std::unordered_set<conn*>& live) {
        if (live.count(k) == 0) {
            ++violations_; // a completion after op::close (rule 4)
            return;
        }
        switch (c.kind) {
        case io::op::recv:
            if (c.result > 0) {
                k->in.append(c.data, static_cast<std::size_t>(c.result));
                if (!k->responding && k->in.find("\r\n\r\n") != std::string::npos) {
                    respond(d, *k);
                }
            } else if (!c.more && !k->responding && !k->closing) {
                k->closing = true; // the peer left before asking
                d.close(k->fd, k);
            }
            break;
        case io::op::send:
            if (c.result < 0 || static_cast<std::size_t>(c.result) != k->iov.iov_len) {
                ++violations_; // a 60-byte answer on loopback goes out whole
            } else {
                ++answered_;
            }
            if (!k->closing) {
                k->closing = true;
                d.close(k->fd, k);
            }
            break;
        case io::op::close:
            live.erase(k);
            delete k;
            break;
        case io::op::accept:
        case io::op::connect:
            ++violations_;
            break;
        }
    }

    void respond(io::driver& d, conn& k) {
        k.responding = true;
        // "GET /i/<n> HTTP/1.1": the number between "/i/" and the next space.
        const std::size_t start = k.in.find("/i/");
        const std::size_t end = start == std::string::npos ? start : k.in.find(' ', start);
        const std::string body = start == std::string::npos ? "?" : k.in.substr(start + 3, end - start - 3);
        const bool intact = k.in.size() == burst_request(0).size() - 1 + body.size();
        k.out = "HTTP/1.1 " + std::string(intact ? "200 OK" : "400 Bad Request") +
                "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        k.iov = {k.out.data(), k.out.size()};
        if (d.send(k.fd, &k.iov, 1, &k) < 0) {
            k.closing = true;
            d.close(k.fd, &k);
        }
    }

    const io::backend& backend_;
    io::driver_options options_;
    int listen_fd_;
    std::thread thread_;
    std::string create_error_;
    std::atomic<bool> started_{false};
    std::atomic<bool> stop_{false};
    std::atomic<std::size_t> answered_{0};
    std::atomic<std::size_t> violations_{0};
    std::atomic<std::size_t> leaked_{0};
};

// A backend that cannot run on this kernel is skipped with the reason (STYLE.md rule 6).
TEST(uring_burst, tiny_buffer_ring_runs_dry_and_every_request_is_answered) {
    const std::string why = backend_unavailable_reason("uring");
    if (!why.empty()) {
        GTEST_SKIP() << "backend uring cannot run here: " << why;
    }
    std::uint16_t port = 0;
    const int lfd = open_listener(port);
    ASSERT_GE(lfd, 0) << std::strerror(errno);

    auto log = std::make_shared<log_capture>();
    const logger driver_log(log_level::debug, [log](log_level l, std::string_view t) { log->record(l, t); });
    io::driver_options options;
    options.recv_buffer_bytes = 512; // 8 buffers of 512 B: a request needs four of them
    options.recv_buffer_count = 8;
    options.log = &driver_log;
    bare_responder server(*find_backend("uring"), options, lfd);
    server.start();
    if (HasFatalFailure()) {
        server.stop_and_join();
        ::close(lfd);
        return;
    }
    ASSERT_TRUE(log->contains("8 receive buffers of 512 B")) << "the driver did not use the small ring";

    {
        multi_client mc;
        for (std::size_t i = 0; i < burst_connections; ++i) {
            mc.add(port, burst_request(i));
        }
        EXPECT_TRUE(mc.send_all(send_bound)) << mc.first_error();
        EXPECT_TRUE(mc.read_all(read_bound)) << mc.first_error();
        expect_all_answered(mc);
    }
    EXPECT_EQ(server.answered(), burst_connections);
    server.stop_and_join();
    EXPECT_EQ(server.violations(), 0u) << "completions after op::close, or short answers";
    EXPECT_EQ(server.leaked(), 0u) << "connections without their op::close";
    EXPECT_TRUE(log->contains("receive buffers ran out")) << "the burst never exhausted the ring";
}

TEST(uring_burst, server_answers_a_burst_larger_than_its_buffer_ring) {
    const std::string why = backend_unavailable_reason("uring");
    if (!why.empty()) {
        GTEST_SKIP() << "backend uring cannot run here: " << why;
    }
    test_server srv("uring", dispatch_mode::inline_io);
    srv.config().log = log_level::debug;
    srv.config().limits.max_connections = 2 * burst_connections;
    // The burst lands while the only I/O thread is held by an inline handler, so that when
    // it is let go, thousands of accepted connections with a request waiting each arm their
    // receive in one iteration: more than the 1,024 buffers of the default ring.
    std::atomic<bool> holding{false};
    std::atomic<bool> release{false};
    srv.route("GET", "/hold", [&](exchange& ex) {
        holding = true;
        wait_until([&] { return release.load(); }, 20s);
        ex.response().text("held");
    });
    srv.route("GET", "/i/{n}", [](exchange& ex) {
        ex.response().text(std::string(ex.request().path_param("n").value_or("?")));
    });
    srv.start();

    bool held_ok = false;
    std::thread holder([&] {
        test_client c(srv.port(), 30s);
        held_ok = c.send(get_request("/hold")) && c.read_response().has_value();
    });
    EXPECT_TRUE(wait_until([&] { return holding.load(); }, 5s));
    multi_client mc;
    for (std::size_t i = 0; i < burst_connections; ++i) {
        mc.add(srv.port(), burst_request(i));
    }
    bool sent = false;
    bool read = false;
    std::thread burst([&] {
        sent = mc.send_all(send_bound);
        read = mc.read_all(read_bound);
    });
    // The kernel completes handshakes into the listen backlog (4,096) and queues each
    // request meanwhile; a second is plenty on loopback.
    std::this_thread::sleep_for(1s);
    release = true;
    burst.join();
    holder.join();
    EXPECT_TRUE(held_ok);
    EXPECT_TRUE(sent) << mc.first_error();
    EXPECT_TRUE(read) << mc.first_error();
    expect_all_answered(mc);
    EXPECT_TRUE(srv.log().contains("receive buffers ran out")) << "the burst never exhausted the ring";
    EXPECT_TRUE(srv.wait_exchanges_freed(10s));
}

} // namespace
} // namespace sluice::test
