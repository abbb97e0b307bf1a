// The blocking driver: one thread parks in it per connection (thread-per-connection,
// Tomcat BIO / Jetty 7's blocking connector).
//
// wait() is a poll() over the descriptors of its loop (one connection, or the acceptor's
// listeners, however many) plus the wake-up eventfd, so a parked thread still sees its
// mailbox and a client hanging up. send() blocks the thread while the socket takes
// the bytes, but reports what it sent (possibly nothing) after at most 250 ms or as
// soon as wake() is called: the core's write deadline (limits.write_timeout_ms with
// limits.min_send_rate) bounds the whole response, and a server stop is seen while a
// client reads slowly. A per-call SO_SNDTIMEO could not do either: a client reading a
// byte now and then renews it forever. Its traits say connection_per_thread, and the
// core runs an acceptor and a bounded pool for it.
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>

namespace sluice::io::blocking {

class driver final : public io::driver {
public:
    static std::unique_ptr<io::driver> create(const driver_options& options, std::string& error);
    ~driver() override;

    int accept(int listen_fd, void* owner) noexcept override;
    int recv(int fd, void* owner) noexcept override;
    void pause_recv(int fd, void* owner) noexcept override;
    int send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept override;
    int connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept override;
    int shutdown_send(int fd) noexcept override;
    void close(int fd, void* owner) noexcept override;
    int wait(std::chrono::nanoseconds timeout, std::vector<completion>& out) noexcept override;
    void release(std::uint32_t buffer) noexcept override;
    void wake() noexcept override;

private:
    struct entry {
        int fd = -1;
        void* owner = nullptr;
        bool listening = false;
        bool receiving = false;
        bool paused = false;
        bool connecting = false;
    };

    driver(int wakefd, const driver_options& options);
    entry& find_or_add(int fd, void* owner);
    entry* find(int fd) noexcept;

    int wakefd_;
    std::uint32_t buffer_bytes_;
    std::uint32_t send_timeout_ms_;
    std::unique_ptr<char[]> buffers_;
    std::vector<std::uint32_t> free_buffers_;
    std::vector<entry> entries_;
    std::vector<pollfd> pollfds_; // wait()'s poll set, reused; capacity kept >= entries + 1
    std::vector<completion> pending_;
};

} // namespace sluice::io::blocking
