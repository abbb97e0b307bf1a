// A listening socket that another process also holds (a hand-over, handover.h) and that a
// driver closes: the socket lives on, and the closing driver must neither report nor wake for
// the connections that now wait for the other holder. epoll needs an explicit EPOLL_CTL_DEL
// for that: close() drops a registration only with the socket's last descriptor (epoll(7), Q6),
// and a level-triggered listener kept waking the old loop (a spin, while it drained).
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
#include "support/deadline.h"

namespace sluice::test {
namespace {

using steady = std::chrono::steady_clock;

TEST(shared_listener_close, the_closing_driver_stays_quiet) {
    for (const std::string name : {"epoll", "uring", "blocking"}) {
        SCOPED_TRACE(name);
        if (!backend_unavailable_reason(name).empty()) {
            continue;
        }
        const io::backend* b = find_backend(name);
        std::string error;
        io::driver_options o;
        auto d = b->create(o, error);
        ASSERT_NE(d, nullptr) << error;
        const int fd =
            detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"), detail::reuse_port::no, 16);
        const int other_holder = ::dup(fd);
        int owner = 0;
        ASSERT_EQ(d->accept(fd, &owner), 0);
        std::vector<io::completion> out;
        d->wait(std::chrono::milliseconds(10), out); // io_uring submits the accept here
        d->close(fd, &owner);
        bool closed = false;
        ASSERT_TRUE(wait_until([&] {
            out.clear();
            d->wait(std::chrono::milliseconds(10), out);
            for (const auto& c : out) {
                closed = closed || c.kind == io::op::close;
            }
            return closed;
        }));
        // A client connects: the connection waits in the queue, for the other holder.
        const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(detail::bound_port(other_holder));
        ASSERT_EQ(::connect(client, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
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
        ::close(client);
        ::close(other_holder);
    }
}

} // namespace
} // namespace sluice::test
