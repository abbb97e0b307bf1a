// Zero-downtime restart of the real sluice-hello binary (docs/operations.md): under a steady
// load, a new process started with the same handover_socket takes the listening sockets over,
// the old one drains and exits 0, again and again; not one request fails.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "support/app_process.h"
#include "support/backend_matrix.h"
#include "support/steady_load.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

TEST(restart, handover_under_load_fails_no_request) {
    const std::string path = "/tmp/sluice-e2e-ho-" + std::to_string(::getpid()) + ".sock";
    for (const std::string backend : {"epoll", "uring", "blocking"}) {
        SCOPED_TRACE(backend);
        if (!backend_unavailable_reason(backend).empty()) {
            continue;
        }
        const std::vector<std::string> args{"--backend",    backend,
                                            "--io-threads", "2",
                                            "--set",        "handover_socket=" + path,
                                            "--set",        "shutdown_timeout_ms=2000",
                                            "--set",        "admin.listen=127.0.0.1:0"};
        auto current = std::make_unique<app_process>(SLUICE_HELLO_BIN, args);
        ASSERT_TRUE(current->started()) << current->error();
        const std::uint16_t port = current->port();
        const std::uint16_t admin = current->admin_port();
        steady_load load(port, "/", 4);
        constexpr int restarts = 4;
        for (int i = 0; i < restarts; ++i) {
            const std::uint64_t before = load.answered();
            ASSERT_TRUE(wait_until([&] { return load.answered() >= before + 100; })) << load.failures();
            auto next = std::make_unique<app_process>(SLUICE_HELLO_BIN, args);
            ASSERT_TRUE(next->started()) << next->error() << next->log();
            EXPECT_EQ(next->port(), port) << next->log();
            EXPECT_EQ(next->admin_port(), admin) << next->log();
            EXPECT_EQ(current->wait_exit(milliseconds(10'000)), 0) << "restart " << i << ":\n"
                                                                   << current->log();
            // Its stop came from the hand-over, not from a signal anybody sent.
            EXPECT_NE(current->log().find("handed over: waiting for the drain"), std::string::npos)
                << current->log();
            EXPECT_EQ(current->log().find("signal 15"), std::string::npos) << current->log();
            current = std::move(next);
        }
        const std::uint64_t before = load.answered();
        ASSERT_TRUE(wait_until([&] { return load.answered() >= before + 100; })) << load.failures();
        load.stop();
        EXPECT_EQ(load.failures(), "");
        EXPECT_EQ(current->stop(), 0);
    }
    ::unlink(path.c_str());
}

int listening_socket(const char* host, std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    ::inet_pton(AF_INET, host, &a.sin_addr);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

TEST(restart, systemd_socket_activation_is_adopted) {
    const int fd = listening_socket("127.0.0.1", 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    const std::uint16_t port = ntohs(a.sin_port);
    // A connection that waits in the queue before the server exists is served by it.
    test_client early(port);
    ASSERT_TRUE(early.send(get_request("/"))) << early.error();
    app_process app(SLUICE_HELLO_BIN, {"--backend", "epoll", "--io-threads", "2"}, fd);
    ::close(fd);
    ASSERT_TRUE(app.started()) << app.error();
    EXPECT_EQ(app.port(), port) << app.log();
    EXPECT_NE(app.log().find("adopted 1 inherited listening socket"), std::string::npos) << app.log();
    auto r = early.read_response();
    ASSERT_TRUE(r) << early.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(app.stop(), 0);
}

TEST(restart, a_systemd_socket_for_another_address_is_a_startup_error) {
    const int fd = listening_socket("127.0.0.2", 0);
    ASSERT_GE(fd, 0);
    app_process app(SLUICE_HELLO_BIN, {"--backend", "epoll"}, fd, milliseconds(3'000));
    ::close(fd);
    EXPECT_FALSE(app.started());
    EXPECT_NE(app.log().find("LISTEN_FDS"), std::string::npos) << app.log();
    EXPECT_NE(app.log().find("not on 127.0.0.1"), std::string::npos) << app.log();
}

} // namespace
} // namespace sluice::test
