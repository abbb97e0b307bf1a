// A connect that the kernel has completed by the time connect() returns (loopback, and any
// peer that answers within the call) must be reported at once, not behind every event that was
// already waiting. The gateway opens its upstream connections while a burst of requests is
// ready: a readiness driver that waits for the connect's EPOLLOUT gets it after the whole
// burst (the kernel's ready list is first come, first served), so no request goes upstream
// until the last of the burst is read — the first 3-s round of S1 at 1,500 users was ~100 ms
// late for every request, not only for the last.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <sluice/backend.h>

#include "server/socket_util.h"
#include "support/backend_matrix.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

int connect_blocking(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in a = loopback(port);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

/// Gives every lent buffer back (rule 5).
void release_all(io::driver& d, const std::vector<io::completion>& out) {
    for (const io::completion& c : out) {
        if (c.buffer != io::no_buffer) {
            d.release(c.buffer);
        }
    }
}

/// `count` loopback connections that a driver receives on, idle; ready() makes every one of
/// them readable at once, as a burst of requests does. The destructor closes them through the
/// driver and lets it report the closes (rule 4).
class ready_burst {
public:
    ready_burst(io::driver& d, int count) : d_(d) {
        listener_ = detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"),
                                          detail::reuse_port::no, 1024);
        if (listener_ < 0) {
            return;
        }
        port_ = detail::bound_port(listener_);
        for (int i = 0; i < count; ++i) {
            const int c = connect_blocking(port_);
            const int fd = c < 0 ? -1 : ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c >= 0) {
                clients_.push_back(c);
            }
            if (fd < 0 || d_.recv(fd, &owner_) != 0) {
                if (fd >= 0) {
                    ::close(fd);
                }
                return;
            }
            served_.push_back(fd);
        }
        std::vector<io::completion> out;
        d_.wait(10ms, out); // io_uring submits the receives here
        idle_ = out.empty();
    }
    ~ready_burst() {
        for (const int fd : served_) {
            d_.close(fd, &owner_);
        }
        std::vector<io::completion> out;
        for (int i = 0; i < 20; ++i) {
            out.clear();
            d_.wait(1ms, out);
            release_all(d_, out);
        }
        for (const int c : clients_) {
            ::close(c);
        }
        if (listener_ >= 0) {
            ::close(listener_);
        }
    }
    ready_burst(const ready_burst&) = delete;
    ready_burst& operator=(const ready_burst&) = delete;

    /// All `count` connections open and receiving, and nothing reported yet.
    bool armed(int count) const noexcept { return static_cast<int>(served_.size()) == count && idle_; }
    std::uint16_t port() const noexcept { return port_; }
    /// One byte from every client: all readable at once.
    bool ready() {
        for (const int c : clients_) {
            if (::send(c, "x", 1, MSG_NOSIGNAL) != 1) {
                return false;
            }
        }
        return true;
    }

private:
    io::driver& d_;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::vector<int> clients_;
    std::vector<int> served_;
    int owner_ = 0;
    bool idle_ = false;
};

TEST(connect_order, a_connect_done_at_once_is_reported_before_a_backlog_of_ready_sockets) {
    for (const std::string name : {"epoll", "uring"}) {
        SCOPED_TRACE(name);
        if (!backend_unavailable_reason(name).empty()) {
            continue;
        }
        std::string error;
        io::driver_options o; // 256 events per wait: the backlog below takes three
        auto d = find_backend(name)->create(o, error);
        ASSERT_NE(d, nullptr) << error;
        // 600 connections, receiving through the driver, idle, then all readable at once...
        constexpr int backlog = 600;
        ready_burst burst(*d, backlog);
        ASSERT_TRUE(burst.armed(backlog));
        ASSERT_TRUE(burst.ready());
        // ...and a new connection to the same listener: on loopback the handshake is done
        // inside connect() (the listener's queue takes it; nobody needs to accept).
        const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        const sockaddr_in a = loopback(burst.port());
        int up_owner = 0;
        ASSERT_EQ(d->connect(up, reinterpret_cast<const sockaddr*>(&a), sizeof a, &up_owner), 0);

        // The backlog needs three waits of 256 events; the connect must not wait for them all.
        // (io_uring reports whatever its ring holds in one wait: the backlog and the connect
        // together; a readiness driver gets the connect's EPOLLOUT behind the backlog.)
        int reads_before = 0;
        int connect_result = 1;
        int waits = 0;
        std::vector<io::completion> out;
        while (waits < 50 && connect_result == 1) {
            ++waits;
            out.clear();
            d->wait(100ms, out);
            for (const io::completion& c : out) {
                if (c.owner == &up_owner && c.kind == io::op::connect) {
                    connect_result = c.result;
                } else if (c.kind == io::op::recv && c.result > 0 && connect_result == 1) {
                    ++reads_before;
                }
            }
            release_all(*d, out);
        }
        EXPECT_EQ(connect_result, 0);
        EXPECT_LE(waits, 2) << "the connect was reported behind the " << reads_before
                            << " reads of sockets that were ready before it";
        d->close(up, &up_owner);
    }
}

TEST(connect_order, a_burst_of_ready_sockets_is_reported_in_batches_of_the_loop_size) {
    // io_uring with DEFER_TASKRUN runs only 20 of the kernel's queued completions per enter
    // that waits (IO_LOCAL_TW_DEFAULT_MAX): a burst then came out 20 per loop iteration, and
    // every completion queued behind it waited for all the iterations before it.
    for (const std::string name : {"epoll", "uring"}) {
        SCOPED_TRACE(name);
        if (!backend_unavailable_reason(name).empty()) {
            continue;
        }
        std::string error;
        io::driver_options o; // up to 256 receive buffers lent per wait (rule 5)
        auto d = find_backend(name)->create(o, error);
        ASSERT_NE(d, nullptr) << error;
        constexpr int burst = 600;
        ready_burst sockets(*d, burst);
        ASSERT_TRUE(sockets.armed(burst));
        ASSERT_TRUE(sockets.ready());
        int reads = 0;
        int waits = 0;
        std::vector<io::completion> out;
        while (waits < 100 && reads < burst) {
            ++waits;
            out.clear();
            d->wait(100ms, out);
            for (const io::completion& c : out) {
                reads += c.kind == io::op::recv && c.result > 0 ? 1 : 0;
            }
            release_all(*d, out);
        }
        EXPECT_EQ(reads, burst);
        // 600 / 256 rounds up to 3; one more for a wait that returns between two batches.
        EXPECT_LE(waits, 4) << "a burst of " << burst << " took " << waits << " waits";
    }
}

} // namespace
} // namespace sluice::test
