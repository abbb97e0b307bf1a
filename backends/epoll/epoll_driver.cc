#include "epoll_driver.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>

namespace sluice::io::epoll {

namespace {

constexpr std::uint64_t wake_key = ~std::uint64_t{0};
// Accepts per listener per wait: enough to drain a burst, small enough to stay fair to
// the connections already open (level-triggered, so the rest is reported again).
constexpr int accept_batch_size = 64;

std::uint64_t key(int fd, std::uint32_t generation) noexcept {
    return static_cast<std::uint32_t>(fd) | (std::uint64_t{generation} << 32);
}

/// The socket's pending error (SO_ERROR, which reading clears): what a failed connect or a
/// hang-up was.
int socket_error(int fd) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return err;
}

} // namespace

std::unique_ptr<io::driver> driver::create(const driver_options& options, std::string& error) {
    const int epfd = ::epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        error = std::string("epoll_create1: ") + std::system_category().message(errno);
        return nullptr;
    }
    const int wakefd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakefd < 0) {
        error = std::string("eventfd: ") + std::system_category().message(errno);
        ::close(epfd);
        return nullptr;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = wake_key;
    if (::epoll_ctl(epfd, EPOLL_CTL_ADD, wakefd, &ev) != 0) {
        error = std::string("epoll_ctl(eventfd): ") + std::system_category().message(errno);
        ::close(wakefd);
        ::close(epfd);
        return nullptr;
    }
    return std::unique_ptr<io::driver>(new driver(epfd, wakefd, options));
}

driver::driver(int epfd, int wakefd, const driver_options& options)
    : epfd_(epfd), wakefd_(wakefd), buffer_bytes_(options.recv_buffer_bytes),
      buffers_(new char[std::size_t{options.recv_buffer_bytes} * options.recv_buffer_count]),
      events_(options.recv_buffer_count) {
    // LIFO: the most recently used buffer is reused first, so a lightly loaded loop touches
    // only a few of them (RSS grows with concurrency, not with the pool's size).
    free_buffers_.reserve(options.recv_buffer_count);
    for (std::uint32_t i = options.recv_buffer_count; i-- > 0;) {
        free_buffers_.push_back(i);
    }
    slots_.resize(1024);
    pending_.reserve(64);
}

driver::~driver() {
    ::close(wakefd_);
    ::close(epfd_);
}

driver::slot* driver::slot_for(int fd) noexcept {
    if (fd < 0) {
        return nullptr;
    }
    const auto i = static_cast<std::size_t>(fd);
    if (i >= slots_.size()) {
        try {
            slots_.resize(std::max(i + 1, slots_.size() * 2));
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    }
    return &slots_[i];
}

bool driver::register_fd(int fd, slot& s, std::uint32_t events) noexcept {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key(fd, s.generation);
    if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        return false;
    }
    s.registered = true;
    return true;
}

int driver::accept(int listen_fd, void* owner) noexcept {
    slot* s = slot_for(listen_fd);
    if (s == nullptr) {
        return -ENOMEM;
    }
    s->owner = owner;
    s->listening = true;
    if (!s->registered && !register_fd(listen_fd, *s, EPOLLIN)) {
        return -errno;
    }
    return 0;
}

int driver::recv(int fd, void* owner) noexcept {
    slot* s = slot_for(fd);
    if (s == nullptr) {
        return -ENOMEM;
    }
    s->owner = owner;
    s->receiving = true;
    s->paused = false;
    if (!s->registered && !register_fd(fd, *s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)) {
        s->receiving = false;
        return -errno;
    }
    if (s->maybe_readable || s->hung_up) {
        mark_ready(fd, *s); // data (or a FIN) arrived while we were not reading: no new edge
    }
    return 0;
}

void driver::pause_recv(int fd, void* owner) noexcept {
    slot* s = slot_for(fd);
    if (s == nullptr || !s->receiving) {
        return;
    }
    s->receiving = false;
    s->paused = true;
    try {
        pending_.push_back({owner, op::recv, false, -ECANCELED, no_buffer, nullptr});
    } catch (const std::bad_alloc&) {
    }
    if (s->hung_up) {
        // The FIN came with bytes read before this pause: its EPOLLRDHUP edge is spent and no new
        // edge will come, so the ready list reports the hang-up (rule 6; issue 6, defect 7).
        mark_ready(fd, *s);
    }
}

void driver::report_hang_up(int fd, slot& s, std::vector<completion>& out) noexcept {
    s.paused = false;
    out.push_back({s.owner, op::recv, false, -socket_error(fd), no_buffer, nullptr});
}

void driver::mark_ready(int fd, slot& s) noexcept {
    if (s.in_ready) {
        return;
    }
    try {
        ready_.push_back(key(fd, s.generation));
        s.in_ready = true;
    } catch (const std::bad_alloc&) {
    }
}

int driver::send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept {
    slot* s = slot_for(fd);
    if (s == nullptr) {
        return -ENOMEM;
    }
    s->owner = owner;
    s->iov = iov;
    s->iovcnt = iovcnt;
    try {
        try_send(fd, *s, pending_);
    } catch (...) {
        return -ENOMEM;
    }
    return 0;
}

void driver::try_send(int fd, slot& s, std::vector<completion>& out) noexcept {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(s.iov);
    msg.msg_iovlen = static_cast<std::size_t>(s.iovcnt);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!s.registered && !register_fd(fd, s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)) {
            s.iov = nullptr;
            out.push_back({s.owner, op::send, false, -errno, no_buffer, nullptr});
        }
        return; // EPOLLOUT's edge retries
    }
    s.iov = nullptr;
    out.push_back(
        {s.owner, op::send, false, n < 0 ? -errno : static_cast<std::int32_t>(n), no_buffer, nullptr});
}

int driver::connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept {
    slot* s = slot_for(fd);
    if (s == nullptr) {
        return -ENOMEM;
    }
    s->owner = owner;
    if (::connect(fd, addr, len) == 0) {
        pending_.push_back({owner, op::connect, false, 0, no_buffer, nullptr});
        return 0;
    }
    if (errno != EINPROGRESS) {
        return -errno;
    }
    s->connecting = true;
    if (!s->registered && !register_fd(fd, *s, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)) {
        s->connecting = false;
        return -errno;
    }
    // The handshake may be over already: on loopback the peer's answer is processed as the
    // connect() call releases the socket, just after it chose EINPROGRESS. Its EPOLLOUT would
    // then wait behind every event already ready (the kernel's ready list is first come,
    // first served): a burst of requests would all be read before the first of them went
    // upstream. One poll() per new connection reports it with the next wait instead.
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 0) == 1) {
        s->connecting = false;
        const int err = (p.revents & (POLLERR | POLLHUP)) != 0 ? socket_error(fd) : 0;
        try {
            pending_.push_back({owner, op::connect, false, -err, no_buffer, nullptr});
        } catch (const std::bad_alloc&) {
            s->connecting = true; // its EPOLLOUT reports it, later
        }
    }
    return 0;
}

int driver::shutdown_send(int fd) noexcept {
    return ::shutdown(fd, SHUT_WR) == 0 ? 0 : -errno;
}

void driver::close(int fd, void* owner) noexcept {
    if (slot* s = slot_for(fd)) {
        if (s->listening && s->registered) {
            // A listening socket may live on in another process (handed over for a restart,
            // or inherited): close() removes an epoll registration only when the last
            // descriptor of the socket closes (epoll(7), Q6), and this loop would keep waking,
            // level-triggered, for connections that are no longer ours.
            ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
        }
        // The next owner of this descriptor number gets a new generation: events and ready
        // entries of this one are dropped (rule 4 of backend.h).
        const std::uint32_t next_generation = s->generation + 1;
        *s = slot{};
        s->generation = next_generation;
    }
    ::close(fd); // removes a connection's registration too: we never dup those
    try {
        pending_.push_back({owner, op::close, false, 0, no_buffer, nullptr});
    } catch (const std::bad_alloc&) {
    }
}

int driver::wait(std::chrono::nanoseconds timeout, std::vector<completion>& out) noexcept {
    const std::size_t before = out.size();
    try {
        // Completions of earlier submissions come first: they happened first.
        out.insert(out.end(), pending_.begin(), pending_.end());
        pending_.clear();
        if (out.size() > before && polled_last_) {
            // Submissions already completed (a send written at once, a close): report them
            // without a syscall; the next wait polls, so no socket waits more than one round.
            polled_last_ = false;
            return static_cast<int>(out.size() - before);
        }
        polled_last_ = true;
        if (out.size() > before || !ready_.empty()) {
            timeout = std::chrono::nanoseconds(0);
        }
        timespec ts{};
        const timespec* tsp = nullptr;
        if (timeout.count() >= 0) {
            ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
            ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
            tsp = &ts;
        }
        // epoll_pwait2 (Linux 5.11) takes a timespec: timers keep their sub-millisecond precision.
        const int n = ::epoll_pwait2(epfd_, events_.data(), static_cast<int>(events_.size()), tsp, nullptr);
        if (n < 0 && errno != EINTR) {
            return -errno;
        }
        for (int i = 0; i < n; ++i) {
            on_event(events_[static_cast<std::size_t>(i)], out);
        }
        // Sockets known to hold unread bytes (or a FIN behind data), one read each; a paused one
        // whose FIN was seen gets its hang-up reported instead.
        ready_now_.swap(ready_);
        for (std::uint64_t k : ready_now_) {
            const int fd = static_cast<int>(k & 0xffffffffu);
            slot& s = slots_[static_cast<std::size_t>(fd)];
            if (s.generation != static_cast<std::uint32_t>(k >> 32)) {
                continue; // closed meanwhile
            }
            s.in_ready = false;
            if (s.receiving) {
                read_once(fd, s, out);
            } else if (s.paused && s.hung_up) {
                report_hang_up(fd, s, out);
            }
        }
        ready_now_.clear();
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    return static_cast<int>(out.size() - before);
}

void driver::on_event(const epoll_event& ev, std::vector<completion>& out) noexcept {
    if (ev.data.u64 == wake_key) {
        std::uint64_t v = 0;
        [[maybe_unused]] const ssize_t r = ::read(wakefd_, &v, sizeof v);
        return;
    }
    const int fd = static_cast<int>(ev.data.u64 & 0xffffffffu);
    if (static_cast<std::size_t>(fd) >= slots_.size()) {
        return;
    }
    slot& s = slots_[static_cast<std::size_t>(fd)];
    if (s.generation != static_cast<std::uint32_t>(ev.data.u64 >> 32) || s.owner == nullptr) {
        return; // stale: the descriptor was closed (and maybe reused) since
    }
    if (s.listening) {
        accept_batch(fd, s, out);
        return;
    }
    const std::uint32_t e = ev.events;
    if ((e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0) {
        if (s.connecting) {
            s.connecting = false;
            out.push_back({s.owner, op::connect, false, -socket_error(fd), no_buffer, nullptr});
        } else if (s.iov != nullptr) {
            try_send(fd, s, out);
        }
    }
    if ((e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        s.hung_up = true;
    }
    if ((e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        s.maybe_readable = true;
        if (s.receiving) {
            read_once(fd, s, out);
        } else if (s.paused && s.hung_up) {
            report_hang_up(fd, s, out); // rule 6: a paused receiver still hears the peer leave
        }
    }
}

void driver::accept_batch(int fd, slot& s, std::vector<completion>& out) noexcept {
    for (int i = 0; i < accept_batch_size; ++i) {
        const int c = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            out.push_back({s.owner, op::accept, true, c, no_buffer, nullptr});
            continue;
        }
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) {
            return;
        }
        if (err == EINTR || err == ECONNABORTED || err == EPROTO) {
            continue; // that one connection is gone; the next may be fine
        }
        // Out of descriptors or memory: stop watching the listener (level-triggered would spin)
        // and let the owner re-arm later.
        ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
        s.registered = false;
        s.listening = false;
        out.push_back({s.owner, op::accept, false, -err, no_buffer, nullptr});
        return;
    }
}

void driver::read_once(int fd, slot& s, std::vector<completion>& out) noexcept {
    if (free_buffers_.empty()) {
        mark_ready(fd, s); // every buffer is lent out in this batch; read in the next wait
        return;
    }
    const std::uint32_t b = free_buffers_.back();
    char* data = buffers_.get() + std::size_t{b} * buffer_bytes_;
    const ssize_t n = ::recv(fd, data, buffer_bytes_, 0);
    if (n > 0) {
        free_buffers_.pop_back();
        out.push_back({s.owner, op::recv, true, static_cast<std::int32_t>(n), b, data});
        if (static_cast<std::size_t>(n) == buffer_bytes_ || s.hung_up) {
            mark_ready(fd, s); // more may wait, or the FIN behind these bytes
        } else {
            s.maybe_readable = false;
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        s.maybe_readable = false;
        return;
    }
    if (n < 0 && errno == EINTR) {
        mark_ready(fd, s);
        return;
    }
    s.receiving = false;
    s.maybe_readable = false;
    out.push_back({s.owner, op::recv, false, n == 0 ? 0 : -errno, no_buffer, nullptr});
}

void driver::release(std::uint32_t buffer) noexcept {
    free_buffers_.push_back(buffer);
}

void driver::wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t r = ::write(wakefd_, &one, sizeof one);
}

} // namespace sluice::io::epoll
