// One client connection through the TLS decorator over a real backend driver, to a fake
// upstream on loopback: what the decorator's unit tests drive by hand, as the client's
// transport would (tls/tls_driver.h).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>
#include <sluice/client.h>
#include <sluice/log.h>

#include "client/upstream.h"
#include "support/backend_matrix.h"
#include "support/fake_upstream.h"
#include "tls/client_tls_context.h"
#include "tls/tls_driver.h"

namespace sluice::test {

class tls_client_rig {
public:
    /// Connects to up over the backend named `backend`; ok() says whether every step up to the
    /// connect was taken (the handshake is pumped by the test: connected). sndbuf > 0 pins the
    /// socket's send buffer first.
    tls_client_rig(const char* backend, const fake_upstream& up, int sndbuf = 0)
        : state_({"https://" + up.address()}, upstream_opts()),
          ctx_(client_opts(), state_, logger{log_level::error}) {
        const io::backend* b = find_backend(backend);
        if (b == nullptr) {
            ADD_FAILURE() << "no backend named " << backend;
            return;
        }
        std::string error;
        auto inner = b->create(io::driver_options{}, error);
        if (inner == nullptr) {
            ADD_FAILURE() << backend << ": " << error;
            return;
        }
        d_ = std::make_unique<detail::tls_driver>(std::move(inner), nullptr);
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || (sndbuf > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf) != 0) ||
            d_->adopt_client(fd, ctx_, 0) != 0) {
            ADD_FAILURE() << "socket, SO_SNDBUF or adopt_client failed";
            if (fd >= 0) {
                ::close(fd);
            }
            return;
        }
        fd_ = fd;
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(up.port());
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ok_ = d_->connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr, &owner_) == 0;
        EXPECT_TRUE(ok_) << "connect";
    }

    bool ok() const noexcept { return ok_; }
    detail::tls_driver& driver() noexcept { return *d_; }
    int fd() const noexcept { return fd_; }
    void* owner() noexcept { return &owner_; }

    bool connected = false; ///< the handshake ended well (op::connect with 0)
    bool closed = false;    ///< op::close came

    /// Waits on the driver until done() holds or budget passes. Each completion is checked to
    /// be the owner's, sets connected / closed, goes to on(c), and its lent buffer is given back.
    template <class Done, class On>
    void pump(Done done, std::chrono::milliseconds budget, On on) {
        const auto until = std::chrono::steady_clock::now() + budget;
        while (!done() && std::chrono::steady_clock::now() < until) {
            out_.clear();
            ASSERT_GE(d_->wait(std::chrono::milliseconds(10), out_), 0);
            for (const io::completion& c : out_) {
                ASSERT_EQ(c.owner, &owner_);
                if (c.kind == io::op::connect) {
                    ASSERT_EQ(c.result, 0) << "handshake";
                    connected = true;
                } else if (c.kind == io::op::close) {
                    closed = true;
                }
                on(c);
                if (c.kind == io::op::recv && c.buffer != io::no_buffer) {
                    d_->release(c.buffer);
                }
            }
        }
    }
    template <class Done>
    void pump(Done done, std::chrono::milliseconds budget) {
        pump(done, budget, [](const io::completion&) {});
    }

private:
    static upstream_options upstream_opts() {
        upstream_options uo;
        uo.resolve_interval = std::chrono::milliseconds(0);
        return uo;
    }
    static client_tls_options client_opts() {
        client_tls_options o;
        o.verify = tls_verify::none;
        return o;
    }

    const detail::upstream_state state_;
    detail::client_tls_context ctx_;
    std::unique_ptr<detail::tls_driver> d_;
    int fd_ = -1;
    int owner_ = 0; // only its address matters
    bool ok_ = false;
    std::vector<io::completion> out_;
};

} // namespace sluice::test
