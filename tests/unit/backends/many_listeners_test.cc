// One driver accepting on many listening sockets: a hand-over from a server with 8 I/O
// threads (8 SO_REUSEPORT sockets, twice that with tls.listen) to one whose acceptor is a
// single loop, or systemd passing that many. The kernel spreads connections over all of them,
// so a socket the driver does not watch keeps its connections queued with nobody to take them
// (found by review: the blocking driver polled at most 7 and dropped the rest silently).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <sluice/backend.h>

#include "server/socket_util.h"
#include "support/backend_matrix.h"
#include "support/deadline.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

TEST(many_listeners, every_socket_a_driver_accepts_on_is_watched) {
    constexpr std::size_t sockets = 20;
    for (const std::string name : {"epoll", "uring", "blocking"}) {
        if (!backend_unavailable_reason(name).empty()) {
            continue; // io_uring refused by this kernel: its own probe test says so
        }
        SCOPED_TRACE(name);
        std::string error;
        auto d = find_backend(name)->create(io::driver_options{}, error);
        ASSERT_NE(d, nullptr) << error;
        std::vector<int> fds;
        std::vector<int> owners(sockets);
        std::vector<std::unique_ptr<test_client>> clients;
        for (std::size_t i = 0; i < sockets; ++i) {
            fds.push_back(detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"),
                                                detail::reuse_port::no, 16));
            ASSERT_GE(fds.back(), 0);
            ASSERT_EQ(d->accept(fds.back(), &owners[i]), 0);
        }
        for (const int fd : fds) {
            clients.push_back(std::make_unique<test_client>(detail::bound_port(fd), default_timeout,
                                                            client_transport::plain));
            ASSERT_TRUE(clients.back()->connected()) << clients.back()->error();
        }
        std::set<const void*> accepted_on;
        std::vector<int> accepted;
        const auto end = test_clock::now() + default_timeout;
        std::vector<io::completion> out;
        while (accepted_on.size() < sockets && test_clock::now() < end) {
            out.clear();
            d->wait(std::chrono::milliseconds(10), out);
            for (const auto& c : out) {
                if (c.kind == io::op::accept && c.result >= 0) {
                    accepted_on.insert(c.owner);
                    accepted.push_back(c.result);
                }
            }
        }
        EXPECT_EQ(accepted_on.size(), sockets) << "listening sockets whose connection was never accepted";
        for (std::size_t i = 0; i < sockets; ++i) {
            d->close(fds[i], &owners[i]);
        }
        for (const int c : accepted) {
            ::close(c);
        }
        out.clear();
        d->wait(std::chrono::milliseconds(0), out); // the closes' reports
    }
}

} // namespace
} // namespace sluice::test
