// Zero-downtime restart of the real sluice-hello binary (docs/operations.md): under a steady
// load, a new process started with the same handover_socket takes the listening sockets over,
// the old one drains and exits 0, again and again; not one request fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "support/app_process.h"
#include "support/backend_matrix.h"
#include "support/steady_load.h"

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

} // namespace
} // namespace sluice::test
