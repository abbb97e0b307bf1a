// The epoll driver: a readiness backend that emulates completions (Seastar's
// reactor_backend_epoll idea): try the syscall, wait for readiness on EAGAIN.
//
// Edge-triggered for connections (measured choice, docs/backends.md): a socket is
// registered once with IN|OUT|RDHUP and never modified again, so a keep-alive
// request costs epoll_wait + recv + sendmsg and no epoll_ctl. A read shorter than the
// buffer means the socket was drained at that instant; a later arrival makes a new
// edge. A full read, or a hang-up seen together with data, puts the socket on a ready
// list that the next wait() reads without waiting for an edge. Listeners are level-
// triggered: each wait accepts a bounded batch and the rest is reported again.
//
// Stale events: every fd slot carries a generation, and the event's 64-bit user data
// holds fd and generation, so an event for a closed and reused descriptor is dropped
// (nginx's instance bit, widened).
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>

namespace sluice::io::epoll {

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
    struct slot {
        void* owner = nullptr;
        const iovec* iov = nullptr; // a send waiting for EPOLLOUT
        std::uint32_t generation = 0;
        int iovcnt = 0;
        bool registered = false;
        bool listening = false;
        bool receiving = false;
        bool paused = false;
        bool maybe_readable = false; // unread data may wait (no edge will tell us)
        bool hung_up = false;        // the peer's FIN or an error was seen (its edge never repeats)
        bool in_ready = false;
        bool connecting = false;
    };

    driver(int epfd, int wakefd, const driver_options& options);
    slot* slot_for(int fd) noexcept;
    bool register_fd(int fd, slot& s, std::uint32_t events) noexcept;
    void on_event(const epoll_event& ev, std::vector<completion>& out) noexcept;
    void accept_batch(int fd, slot& s, std::vector<completion>& out) noexcept;
    void read_once(int fd, slot& s, std::vector<completion>& out) noexcept;
    void try_send(int fd, slot& s, std::vector<completion>& out) noexcept;
    void mark_ready(int fd, slot& s) noexcept;
    /// Rule 6 of backend.h: the peer left while receiving was paused.
    void report_hang_up(int fd, slot& s, std::vector<completion>& out) noexcept;

    int epfd_;
    int wakefd_;
    std::uint32_t buffer_bytes_;
    std::unique_ptr<char[]> buffers_;
    std::vector<std::uint32_t> free_buffers_;
    std::vector<slot> slots_;
    std::vector<completion> pending_;  // completions produced outside wait()
    std::vector<std::uint64_t> ready_; // fd | generation << 32
    std::vector<std::uint64_t> ready_now_;
    std::vector<epoll_event> events_;
    bool polled_last_ = true;
};

} // namespace sluice::io::epoll
