// A listening socket that another process also holds (a hand-over, handover.h) and that a
// driver closes: the socket lives on, and the closing driver must neither report nor wake for
// the connections that now wait for the other holder. epoll needs an explicit EPOLL_CTL_DEL
// for that: close() drops a registration only with the socket's last descriptor (epoll(7), Q6),
// and a level-triggered listener kept waking the old loop (a spin, while it drained).
// And a connection that arrives while the driver closes such a socket is either reported to
// the closing driver (whose server answers it in its drain) or left for the other holder,
// who is woken for it: io_uring's accept waits with an exclusive wake-up, so the oldest
// waiter (the closing driver) is the one woken, and a cancellation that then wins over the
// accept would leave the connection in the queue with nobody told about it.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>

#include "server/socket_util.h"
#include "support/backend_matrix.h"
#include "support/deadline.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using steady = std::chrono::steady_clock;

// The backends of the test that can run here.
const std::vector<std::string>& available_backends() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const std::string name : {"epoll", "uring", "blocking"}) {
            if (backend_unavailable_reason(name).empty()) {
                out.push_back(name);
            }
        }
        return out;
    }();
    return names;
}

std::unique_ptr<io::driver> make_driver(const std::string& name) {
    std::string error;
    auto d = find_backend(name)->create(io::driver_options{}, error);
    EXPECT_NE(d, nullptr) << error;
    return d;
}

int open_loopback_listener() {
    return detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"), detail::reuse_port::no, 16);
}

// Runs d until pred holds for what it reported, or the default deadline passes.
bool drive_until(io::driver& d, const std::function<bool(const io::completion&)>& pred) {
    bool seen = false;
    const auto end = steady::now() + default_timeout;
    std::vector<io::completion> out;
    while (!seen && steady::now() < end) {
        out.clear();
        d.wait(std::chrono::milliseconds(10), out);
        for (const auto& c : out) {
            seen = pred(c) || seen;
        }
    }
    return seen;
}

bool is_close(const io::completion& c) {
    return c.kind == io::op::close;
}

TEST(shared_listener_close, the_closing_driver_stays_quiet) {
    for (const std::string& name : available_backends()) {
        SCOPED_TRACE(name);
        auto d = make_driver(name);
        ASSERT_NE(d, nullptr);
        const int fd = open_loopback_listener();
        const int other_holder = ::dup(fd);
        int owner = 0;
        ASSERT_EQ(d->accept(fd, &owner), 0);
        std::vector<io::completion> out;
        d->wait(std::chrono::milliseconds(10), out); // io_uring submits the accept here
        d->close(fd, &owner);
        ASSERT_TRUE(drive_until(*d, is_close));
        // A client connects: the connection waits in the queue, for the other holder.
        test_client client(detail::bound_port(other_holder), default_timeout, client_transport::plain);
        ASSERT_TRUE(client.connected()) << client.error();
        int returns = 0;
        std::size_t accepted = 0;
        const auto end = steady::now() + std::chrono::milliseconds(300);
        while (steady::now() < end) {
            out.clear();
            d->wait(std::chrono::duration_cast<std::chrono::nanoseconds>(end - steady::now()), out);
            ++returns;
            for (const auto& c : out) {
                accepted += c.kind == io::op::accept ? 1 : 0;
            }
        }
        EXPECT_EQ(accepted, 0u) << "a closed listener reported a connection";
        EXPECT_LT(returns, 10) << "the closed listener kept waking the driver";
        ::close(other_holder);
    }
}

TEST(shared_listener_close, a_connection_arriving_as_it_closes_reaches_one_holder) {
    for (const std::string& name : available_backends()) {
        SCOPED_TRACE(name);
        auto closing = make_driver(name);
        auto other = make_driver(name);
        ASSERT_TRUE(closing != nullptr && other != nullptr);
        const int fd = open_loopback_listener();
        const int other_fd = ::dup(fd);
        int closing_owner = 0;
        int other_owner = 0;
        // The closing driver waits first, so an exclusive wake-up goes to it.
        std::vector<io::completion> out;
        ASSERT_EQ(closing->accept(fd, &closing_owner), 0);
        closing->wait(std::chrono::milliseconds(10), out);
        ASSERT_EQ(other->accept(other_fd, &other_owner), 0);
        other->wait(std::chrono::milliseconds(10), out);
        ASSERT_TRUE(out.empty());

        test_client client(detail::bound_port(fd), default_timeout, client_transport::plain);
        ASSERT_TRUE(client.connected()) << client.error();
        closing->close(fd, &closing_owner);

        std::vector<int> accepted; // by either driver; each is that server's connection now
        auto take = [&accepted](const io::completion& c) {
            if (c.kind == io::op::accept && c.result >= 0) {
                accepted.push_back(c.result);
            }
            return is_close(c);
        };
        ASSERT_TRUE(drive_until(*closing, take)) << "the listener's close did not complete";
        if (accepted.empty()) {
            drive_until(*other, [&](const io::completion& c) {
                take(c);
                return !accepted.empty();
            });
        }
        EXPECT_EQ(accepted.size(), 1u) << "the connection reached " << accepted.size() << " holders";
        // Nobody reset it: it is open, with nothing to read.
        pollfd p{client.fd(), POLLIN, 0};
        EXPECT_EQ(::poll(&p, 1, 0), 0) << "the client's connection was closed or reset";
        for (int c : accepted) {
            ::close(c);
        }
        other->close(other_fd, &other_owner);
        drive_until(*other, is_close);
    }
}

} // namespace
} // namespace sluice::test
