#include "blocking_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <span>
#include <system_error>

namespace sluice::io::blocking {

namespace {
// One connection per loop: a couple of buffers cover a read while the previous is parsed.
constexpr std::uint32_t buffer_count = 2;
// The longest one send() blocks before it reports what it sent (possibly nothing), so that
// the loop can act on the core's write deadline at most this late.
constexpr std::uint32_t max_send_block_ms = 250;
// A send's result is an int32_t (backend.h rule 3): never report more than this at once.
constexpr std::size_t max_send_bytes = std::size_t{1} << 30;
} // namespace

std::unique_ptr<io::driver> driver::create(const driver_options& options, std::string& error) {
    const int wakefd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakefd < 0) {
        error = std::string("eventfd: ") + std::system_category().message(errno);
        return nullptr;
    }
    return std::unique_ptr<io::driver>(new driver(wakefd, options));
}

driver::driver(int wakefd, const driver_options& options)
    : wakefd_(wakefd), buffer_bytes_(options.recv_buffer_bytes), send_timeout_ms_(options.send_timeout_ms),
      buffers_(new char[std::size_t{options.recv_buffer_bytes} * buffer_count]) {
    for (std::uint32_t i = buffer_count; i-- > 0;) {
        free_buffers_.push_back(i);
    }
    entries_.reserve(2);
}

driver::~driver() {
    ::close(wakefd_);
}

driver::entry* driver::find(int fd) noexcept {
    for (auto& e : entries_) {
        if (e.fd == fd) {
            return &e;
        }
    }
    return nullptr;
}

driver::entry& driver::find_or_add(int fd, void* owner) {
    entry* e = find(fd);
    if (e == nullptr) {
        // Room for every entry and the wake-up in the poll set, taken here (where a bad_alloc
        // is reported) so that wait() never allocates.
        pollfds_.reserve(entries_.size() + 2);
        entries_.push_back(entry{});
        e = &entries_.back();
        e->fd = fd;
    }
    e->owner = owner;
    return *e;
}

int driver::accept(int listen_fd, void* owner) noexcept {
    try {
        find_or_add(listen_fd, owner).listening = true;
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    return 0;
}

int driver::recv(int fd, void* owner) noexcept {
    try {
        entry& e = find_or_add(fd, owner);
        e.receiving = true;
        e.paused = false;
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    return 0;
}

void driver::pause_recv(int fd, void* owner) noexcept {
    entry* e = find(fd);
    if (e == nullptr || !e->receiving) {
        return;
    }
    e->receiving = false;
    e->paused = true;
    pending_.push_back({owner, op::recv, false, -ECANCELED, no_buffer, nullptr});
}

int driver::send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept {
    // Rule 7 lets a send complete partially: past the array, the core sends the rest again.
    iovec rest_storage[16];
    const auto count = static_cast<std::size_t>(std::min(iovcnt, 16));
    std::copy(iov, iov + count, rest_storage);
    std::span<iovec> rest(rest_storage, count);
    std::size_t total = 0;
    std::size_t first = 0;
    int error = 0;
    // The thread blocks here (this backend's model), but never past one slice: the core's
    // write deadline bounds the whole response (limits.write_timeout_ms with min_send_rate),
    // and only the loop can act on it, so a client that reads a byte now and then must not
    // keep this call going. A wake() (the mailbox: a server stop) ends the wait at once.
    const auto slice =
        std::chrono::milliseconds(std::min<std::uint32_t>(send_timeout_ms_, max_send_block_ms));
    const auto until = std::chrono::steady_clock::now() + slice;
    while (first < rest.size() && total < max_send_bytes) {
        msghdr msg{};
        msg.msg_iov = rest.data() + first;
        msg.msg_iovlen = rest.size() - first;
        const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            error = -errno;
            break;
        }
        if (n > 0) {
            total += static_cast<std::size_t>(n);
            auto left = static_cast<std::size_t>(n);
            while (first < rest.size() && left >= rest[first].iov_len) {
                left -= rest[first].iov_len;
                ++first;
            }
            if (first < rest.size()) {
                rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + left;
                rest[first].iov_len -= left;
            }
            continue; // the socket may take more at once
        }
        // The send buffer is full: wait for room, a wake-up, or the end of the slice.
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) {
            break;
        }
        pollfd fds[2] = {{fd, POLLOUT, 0}, {wakefd_, POLLIN, 0}};
        const auto left_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now);
        const timespec ts{static_cast<time_t>(left_ns.count() / 1'000'000'000),
                          static_cast<long>(left_ns.count() % 1'000'000'000)};
        const int rc = ::ppoll(fds, 2, &ts, nullptr);
        if (rc < 0 && errno != EINTR) {
            error = -errno;
            break;
        }
        if ((fds[1].revents & POLLIN) != 0) {
            break; // the mailbox has work: wait() consumes the wake-up
        }
    }
    // Bytes sent count even when the socket failed after them; the next send reports the error.
    const std::int32_t result = (total > 0 || error == 0) ? static_cast<std::int32_t>(total) : error;
    pending_.push_back({owner, op::send, false, result, no_buffer, nullptr});
    return 0;
}

int driver::connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept {
    try {
        entry& e = find_or_add(fd, owner);
        if (::connect(fd, addr, len) == 0) {
            pending_.push_back({owner, op::connect, false, 0, no_buffer, nullptr});
            return 0;
        }
        if (errno != EINPROGRESS) {
            return -errno;
        }
        e.connecting = true;
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    return 0;
}

int driver::shutdown_send(int fd) noexcept {
    return ::shutdown(fd, SHUT_WR) == 0 ? 0 : -errno;
}

void driver::close(int fd, void* owner) noexcept {
    entries_.erase(
        std::remove_if(entries_.begin(), entries_.end(), [fd](const entry& e) { return e.fd == fd; }),
        entries_.end());
    ::close(fd);
    pending_.push_back({owner, op::close, false, 0, no_buffer, nullptr});
}

int driver::wait(std::chrono::nanoseconds timeout, std::vector<completion>& out) noexcept {
    const std::size_t before = out.size();
    out.insert(out.end(), pending_.begin(), pending_.end());
    pending_.clear();
    if (out.size() > before) {
        timeout = std::chrono::nanoseconds(0);
    }
    // Every entry is watched: an acceptor loop may hold many listening sockets (inherited in a
    // hand-over from a server with more I/O threads). find_or_add() reserved the room.
    std::vector<pollfd>& fds = pollfds_;
    fds.clear();
    fds.push_back({wakefd_, POLLIN, 0});
    for (const auto& e : entries_) {
        short events = 0;
        if (e.listening || e.receiving) {
            events = POLLIN | POLLRDHUP;
        } else if (e.paused) {
            events = POLLRDHUP;
        }
        if (e.connecting) {
            events = static_cast<short>(events | POLLOUT);
        }
        fds.push_back({e.fd, events, 0});
    }
    const std::size_t n = fds.size();
    timespec ts{};
    const timespec* tsp = nullptr;
    if (timeout.count() >= 0) {
        ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
        ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
        tsp = &ts;
    }
    const int rc = ::ppoll(fds.data(), n, tsp, nullptr);
    if (rc < 0) {
        return errno == EINTR ? static_cast<int>(out.size() - before) : -errno;
    }
    if ((fds[0].revents & POLLIN) != 0) {
        std::uint64_t v = 0;
        [[maybe_unused]] const ssize_t r = ::read(wakefd_, &v, sizeof v);
    }
    for (std::size_t i = 1; i < n; ++i) {
        const short re = fds[i].revents;
        if (re == 0) {
            continue;
        }
        entry* e = find(fds[i].fd);
        if (e == nullptr) {
            continue;
        }
        if (e->listening) {
            const int c = ::accept4(e->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c >= 0) {
                out.push_back({e->owner, op::accept, true, c, no_buffer, nullptr});
            } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                e->listening = false;
                out.push_back({e->owner, op::accept, false, -errno, no_buffer, nullptr});
            }
            continue;
        }
        if (e->connecting && (re & (POLLOUT | POLLERR | POLLHUP)) != 0) {
            e->connecting = false;
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            out.push_back({e->owner, op::connect, false, -err, no_buffer, nullptr});
        }
        if (e->receiving && (re & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0) {
            if (free_buffers_.empty()) {
                continue; // the core gives every buffer back before the next wait
            }
            const std::uint32_t b = free_buffers_.back();
            char* data = buffers_.get() + std::size_t{b} * buffer_bytes_;
            const ssize_t r = ::recv(e->fd, data, buffer_bytes_, MSG_DONTWAIT);
            if (r > 0) {
                free_buffers_.pop_back();
                out.push_back({e->owner, op::recv, true, static_cast<std::int32_t>(r), b, data});
            } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                e->receiving = false;
                out.push_back({e->owner, op::recv, false, r == 0 ? 0 : -errno, no_buffer, nullptr});
            }
        } else if (e->paused && (re & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
            e->paused = false;
            out.push_back({e->owner, op::recv, false, 0, no_buffer, nullptr});
        }
    }
    return static_cast<int>(out.size() - before);
}

void driver::release(std::uint32_t buffer) noexcept {
    free_buffers_.push_back(buffer);
}

void driver::wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t r = ::write(wakefd_, &one, sizeof one);
}

} // namespace sluice::io::blocking
