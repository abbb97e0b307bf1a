#include "server/handover.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace sluice::detail {

namespace {

constexpr std::string_view greeting = "SLUICE-HANDOVER/1 ";
constexpr std::string_view ack = "OK";

// Waits for POLLIN on sock (or wake_fd) until the deadline: 1 readable, 0 timed out,
// 2 woken, -errno.
int wait_readable(int sock, int wake_fd, handover_deadline deadline) {
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return 0;
        }
        pollfd p[2] = {{sock, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        const int rc = ::poll(p, wake_fd >= 0 ? 2 : 1, static_cast<int>(left.count()) + 1);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (wake_fd >= 0 && p[1].revents != 0) {
            return 2;
        }
        if (p[0].revents != 0) {
            return 1; // readable, or hung up: the read says which
        }
    }
}

} // namespace

int send_listeners(int sock, std::span<const handed_fd> fds) noexcept {
    if (fds.empty() || fds.size() > max_handed_fds) {
        return -E2BIG;
    }
    char text[greeting.size() + max_handed_fds];
    std::memcpy(text, greeting.data(), greeting.size());
    for (std::size_t i = 0; i < fds.size(); ++i) {
        text[greeting.size() + i] = static_cast<char>(fds[i].role);
    }
    iovec iov{text, greeting.size() + fds.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_handed_fds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    for (std::size_t i = 0; i < fds.size(); ++i) {
        std::memcpy(CMSG_DATA(cm) + i * sizeof(int), &fds[i].fd, sizeof(int));
    }
    // MSG_NOSIGNAL: a peer that left must not kill the old process with SIGPIPE.
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0) {
        return -errno;
    }
    return 0;
}

received_listeners receive_listeners(int sock, handover_deadline deadline) {
    received_listeners out;
    const int ready = wait_readable(sock, -1, deadline);
    if (ready <= 0) {
        out.error = ready == 0 ? "the running server sent no listeners in time"
                               : std::string("poll: ") + std::strerror(-ready);
        return out;
    }
    char text[greeting.size() + max_handed_fds + 1];
    iovec iov{text, sizeof text};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_handed_fds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    // MSG_CMSG_CLOEXEC: the descriptors must not leak into processes this one starts.
    const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
        out.error = std::string("recvmsg: ") + std::strerror(errno);
        return out;
    }
    std::vector<int> fds;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            const std::size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < count; ++i) {
                int fd = -1;
                std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                fds.push_back(fd);
            }
        }
    }
    auto fail = [&](std::string why) {
        for (int fd : fds) {
            ::close(fd);
        }
        out.error = std::move(why);
        return out;
    };
    if (n == 0 && fds.empty()) {
        out.peer_left = true;
        return fail("the running server closed the hand-over connection without sending listeners");
    }
    const std::string_view got(text, static_cast<std::size_t>(n));
    if ((msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0) {
        return fail("the hand-over message was truncated");
    }
    if (!got.starts_with(greeting)) {
        return fail("the peer on the hand-over socket is not a sluice server (no greeting)");
    }
    const std::string_view roles = got.substr(greeting.size());
    if (roles.empty() || roles.size() != fds.size()) {
        return fail("the hand-over message names " + std::to_string(roles.size()) +
                    " listeners but carries " + std::to_string(fds.size()) + " descriptors");
    }
    for (std::size_t i = 0; i < roles.size(); ++i) {
        const char r = roles[i];
        if (r != static_cast<char>(listener_role::main) && r != static_cast<char>(listener_role::admin) &&
            r != static_cast<char>(listener_role::tls)) {
            return fail("the hand-over message names an unknown listener kind");
        }
        out.fds.push_back({static_cast<listener_role>(r), fds[i]});
    }
    return out;
}

int send_ack(int sock) noexcept {
    if (::send(sock, ack.data(), ack.size(), MSG_NOSIGNAL) < 0) {
        return -errno;
    }
    return 0;
}

ack_result wait_ack(int sock, int wake_fd, handover_deadline deadline) {
    const int ready = wait_readable(sock, wake_fd, deadline);
    if (ready == 0) {
        return ack_result::timed_out;
    }
    if (ready == 2) {
        return ack_result::interrupted;
    }
    if (ready < 0) {
        return ack_result::closed;
    }
    char buf[16];
    const ssize_t n = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) {
        return ack_result::closed;
    }
    return std::string_view(buf, static_cast<std::size_t>(n)) == ack ? ack_result::acknowledged
                                                                     : ack_result::garbage;
}

void close_all(std::span<const handed_fd> fds) noexcept {
    for (const auto& f : fds) {
        ::close(f.fd);
    }
}

} // namespace sluice::detail
