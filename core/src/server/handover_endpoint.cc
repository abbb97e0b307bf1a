#include "server/handover_endpoint.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <sluice/error.h>

namespace sluice::detail {

namespace {

std::string errno_text(int err) {
    return std::system_category().message(err);
}

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), std::min(path.size(), sizeof a.sun_path - 1));
    return a;
}

std::string_view result_text(ack_result r) {
    switch (r) {
    case ack_result::acknowledged:
        return "acknowledged";
    case ack_result::closed:
        return "the new process closed the connection without taking over (did it fail to start?)";
    case ack_result::garbage:
        return "the new process answered something other than OK";
    case ack_result::timed_out:
        return "the new process did not acknowledge in time";
    case ack_result::interrupted:
        return "this server is stopping";
    }
    return "";
}

} // namespace

handover_endpoint::handover_endpoint(std::string path, const logger& log, provider fds,
                                     std::function<void()> on_handed_over)
    : path_(std::move(path)), log_(log), fds_(std::move(fds)), on_handed_over_(std::move(on_handed_over)) {}

handover_endpoint::~handover_endpoint() {
    stop();
}

void handover_endpoint::start() {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        throw startup_error("handover_socket", "socket: " + errno_text(errno));
    }
    // Bound under a name of its own, then renamed over the path: a process that connects
    // meanwhile reaches either the old server or this one, never nothing. A name too long for
    // sun_path falls back to unlink-then-bind.
    std::string bind_path = path_ + "." + std::to_string(::getpid());
    if (bind_path.size() >= sizeof(sockaddr_un{}.sun_path)) {
        bind_path = path_;
        ::unlink(path_.c_str());
    }
    ::unlink(bind_path.c_str());
    const sockaddr_un a = unix_address(bind_path);
    const mode_t old_mask = ::umask(0077); // only this user may take the listeners over
    const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    const int bind_err = errno;
    ::umask(old_mask);
    auto fail = [&](const std::string& what, int err) {
        ::close(fd);
        ::unlink(bind_path.c_str());
        throw startup_error("handover_socket",
                            "cannot listen on " + path_ + ": " + what + ": " + errno_text(err));
    };
    if (rc != 0) {
        ::close(fd);
        throw startup_error("handover_socket",
                            "cannot listen on " + path_ + ": bind: " + errno_text(bind_err));
    }
    if (::listen(fd, 8) != 0) {
        fail("listen", errno);
    }
    if (bind_path != path_ && ::rename(bind_path.c_str(), path_.c_str()) != 0) {
        fail("rename", errno);
    }
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
        path_inode_ = st.st_ino;
        path_device_ = st.st_dev;
    }
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) {
        fail("eventfd", errno);
    }
    listen_fd_ = fd;
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error& e) {
        ::close(wake_fd_);
        wake_fd_ = -1;
        listen_fd_ = -1;
        fail("thread", e.code().value());
    }
    log_.info("hand-over socket {}: a server started with the same handover_socket takes over", path_);
}

void handover_endpoint::stop() noexcept {
    if (wake_fd_ >= 0) {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t w = ::write(wake_fd_, &one, sizeof one);
    }
    if (thread_.joinable()) {
        if (thread_.get_id() == std::this_thread::get_id()) {
            thread_.detach(); // from on_handed_over(): run() returns right after it
        } else {
            thread_.join();
        }
    }
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        listen_fd_ = -1;
        // Remove the path only if it is still ours: after a hand-over it is the new server's.
        struct stat st {};
        if (::stat(path_.c_str(), &st) == 0 && st.st_ino == path_inode_ && st.st_dev == path_device_) {
            ::unlink(path_.c_str());
        }
    }
    if (wake_fd_ >= 0) {
        ::close(wake_fd_);
        wake_fd_ = -1;
    }
}

void handover_endpoint::run() noexcept {
    for (;;) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            log_.error("hand-over socket {}: poll: {}; restarts will bind instead", path_, errno_text(errno));
            return;
        }
        if (p[1].revents != 0) {
            return;
        }
        const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn < 0) {
            continue; // EAGAIN, or a peer that left before we accepted
        }
        const bool handed = serve_one(conn);
        ::close(conn);
        if (handed) {
            // Answer no one else: a process racing the one that took over finds this socket
            // closed (the path is the new server's now, or soon).
            ::close(listen_fd_);
            listen_fd_ = -1;
            on_handed_over_();
            return;
        }
    }
}

bool handover_endpoint::serve_one(int conn) noexcept {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
        // The socket is 0600 already; this also covers a path in a directory others can enter.
        log_.warn("hand-over socket {}: refused a process of uid {} (this server runs as uid {})", path_,
                  cred.uid, ::geteuid());
        return false;
    }
    std::vector<handed_fd> fds;
    try {
        fds = fds_();
    } catch (...) {
        return false;
    }
    if (fds.empty()) {
        return false; // stopping: nothing to hand over
    }
    if (const int rc = send_listeners(conn, fds); rc < 0) {
        log_.warn("hand-over to pid {}: cannot send {} listening sockets: {}", cred.pid, fds.size(),
                  errno_text(-rc));
        return false;
    }
    const ack_result r = wait_ack(conn, wake_fd_, std::chrono::steady_clock::now() + handover_timeout);
    if (r != ack_result::acknowledged) {
        if (r != ack_result::interrupted) {
            log_.warn("hand-over to pid {}: {}; still serving", cred.pid, result_text(r));
        }
        return false;
    }
    log_.info("hand-over to pid {}: {} listening socket{} taken over; draining", cred.pid, fds.size(),
              fds.size() == 1 ? "" : "s");
    return true;
}

takeover::takeover(takeover&& o) noexcept : sock(o.sock), fds(std::move(o.fds)) {
    o.sock = -1;
    o.fds.clear();
}

takeover& takeover::operator=(takeover&& o) noexcept {
    if (this != &o) {
        this->~takeover();
        sock = o.sock;
        fds = std::move(o.fds);
        o.sock = -1;
        o.fds.clear();
    }
    return *this;
}

takeover::~takeover() {
    close_all(fds);
    fds.clear();
    if (sock >= 0) {
        ::close(sock);
        sock = -1;
    }
}

void takeover::acknowledge(const logger& log) noexcept {
    if (const int rc = send_ack(sock); rc < 0) {
        log.warn("hand-over: cannot acknowledge to the old server ({}): it keeps serving alongside this one "
                 "until stopped",
                 errno_text(-rc));
    }
    ::close(sock);
    sock = -1;
}

std::optional<takeover> take_over(const std::string& path, const logger& log) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) {
            log.info("hand-over socket {}: none yet (a first start): binding", path);
            return std::nullopt;
        }
        throw startup_error("handover_socket", "cannot use " + path + ": " + errno_text(errno));
    }
    if (!S_ISSOCK(st.st_mode)) {
        // Never rename a socket over a file someone named here by mistake.
        throw startup_error("handover_socket", path + " exists and is not a socket");
    }
    takeover t;
    t.sock = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (t.sock < 0) {
        throw startup_error("handover_socket", "socket: " + errno_text(errno));
    }
    const auto deadline = std::chrono::steady_clock::now() + handover_timeout;
    const sockaddr_un a = unix_address(path);
    for (;;) {
        if (::connect(t.sock, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
            break;
        }
        const int err = errno;
        if (err == ECONNREFUSED || err == ENOENT) {
            log.info("hand-over socket {}: no server answers (it left a stale socket): binding", path);
            return std::nullopt;
        }
        // EAGAIN: its backlog is full (other new processes wait): retry within the deadline.
        if (err != EAGAIN || std::chrono::steady_clock::now() >= deadline) {
            throw startup_error("handover_socket", "cannot connect to " + path + ": " + errno_text(err));
        }
        ::usleep(10'000);
    }
    received_listeners r = receive_listeners(t.sock, deadline);
    if (r.peer_left) {
        log.warn("hand-over socket {}: {}: binding", path, r.error);
        return std::nullopt;
    }
    if (!r.error.empty()) {
        throw startup_error("handover_socket", path + ": " + r.error);
    }
    t.fds = std::move(r.fds);
    return t;
}

} // namespace sluice::detail
