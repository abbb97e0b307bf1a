// The test helper that reads the other end's receive queue from the kernel's table: the
// conformance cases that bound what a server took in subtract it, so it must be right.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "server/socket_util.h"
#include "support/deadline.h"
#include "support/peer_queue.h"

namespace sluice::test {
namespace {

struct fd_closer {
    int fd;
    ~fd_closer() {
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

void check_queue_on(const char* listen_at) {
    SCOPED_TRACE(listen_at);
    const fd_closer listener{
        detail::open_listener(detail::resolve_listen_address(listen_at), detail::reuse_port::no, 4)};
    ASSERT_GE(listener.fd, 0);
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const fd_closer client{::socket(addr.ss_family, SOCK_STREAM, 0)};
    ASSERT_EQ(::connect(client.fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
    const fd_closer server{::accept(listener.fd, nullptr, nullptr)};
    ASSERT_GE(server.fd, 0);

    EXPECT_EQ(peer_receive_queue(client.fd), std::size_t{0});
    const std::string bytes(1000, 'x');
    ASSERT_EQ(::send(client.fd, bytes.data(), bytes.size(), 0), 1000);
    EXPECT_TRUE(wait_until([&] { return peer_receive_queue(client.fd) == std::size_t{1000}; }))
        << peer_receive_queue(client.fd).value_or(0);
    char buf[400];
    ASSERT_EQ(::recv(server.fd, buf, sizeof buf, MSG_WAITALL), 400);
    EXPECT_EQ(peer_receive_queue(client.fd), std::size_t{600});
    // And the other way: the client's queue as the server sees it.
    EXPECT_EQ(peer_receive_queue(server.fd), std::size_t{0});
}

TEST(peer_queue, reads_the_other_ends_unread_bytes_over_ipv4) {
    check_queue_on("127.0.0.1:0");
}

TEST(peer_queue, reads_the_other_ends_unread_bytes_over_ipv6) {
    check_queue_on("[::1]:0");
}

TEST(peer_queue, has_nothing_for_a_socket_that_is_not_connected) {
    const fd_closer s{::socket(AF_INET, SOCK_STREAM, 0)};
    EXPECT_EQ(peer_receive_queue(s.fd), std::nullopt);
}

} // namespace
} // namespace sluice::test
