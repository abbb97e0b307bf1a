// The hand-over protocol (handover.h) over a socketpair: descriptors and their roles arrive
// intact, and every malformed, silent or vanished peer ends in an error (or "peer left")
// within the deadline, with no descriptor left open.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <sluice/error.h>

#include "server/handover.h"
#include "server/inherited_listeners.h"
#include "server/socket_util.h"
#include "support/open_fds.h"

namespace sluice::testing {
namespace {

using namespace std::chrono_literals;
using detail::ack_result;
using detail::handed_fd;
using detail::listener_role;

struct pair {
    int old_side = -1;
    int new_side = -1;
    pair() {
        int sv[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        old_side = sv[0];
        new_side = sv[1];
    }
    ~pair() {
        close_old();
        if (new_side >= 0) {
            ::close(new_side);
        }
    }
    void close_old() {
        if (old_side >= 0) {
            ::close(old_side);
            old_side = -1;
        }
    }
};

int listening_socket() {
    return detail::open_listener(detail::resolve_listen_address("127.0.0.1:0"), detail::reuse_port::no, 16);
}

auto soon(std::chrono::milliseconds d = 2s) {
    return std::chrono::steady_clock::now() + d;
}

TEST(handover_protocol, listeners_and_their_roles_arrive_as_the_same_sockets) {
    const int a = listening_socket();
    const int b = listening_socket();
    const int t = listening_socket();
    pair p;
    const handed_fd sent[] = {{listener_role::main, a}, {listener_role::admin, b}, {listener_role::tls, t}};
    ASSERT_EQ(detail::send_listeners(p.old_side, sent), 0);
    auto got = detail::receive_listeners(p.new_side, soon());
    ASSERT_EQ(got.error, "");
    ASSERT_EQ(got.fds.size(), 3u);
    EXPECT_EQ(got.fds[0].role, listener_role::main);
    EXPECT_EQ(got.fds[1].role, listener_role::admin);
    EXPECT_EQ(got.fds[2].role, listener_role::tls); // tls.listen's socket stays a TLS one
    EXPECT_NE(got.fds[0].fd, a) << "a new descriptor for the same socket";
    EXPECT_EQ(detail::bound_port(got.fds[0].fd), detail::bound_port(a));
    EXPECT_EQ(detail::bound_port(got.fds[1].fd), detail::bound_port(b));
    EXPECT_EQ(detail::bound_port(got.fds[2].fd), detail::bound_port(t));
    EXPECT_NE(::fcntl(got.fds[0].fd, F_GETFD) & FD_CLOEXEC, 0) << "received descriptors are close-on-exec";
    detail::close_all(got.fds);
    ::close(a);
    ::close(b);
    ::close(t);
}

TEST(handover_protocol, a_peer_that_closes_without_sending_has_left) {
    pair p;
    p.close_old();
    auto got = detail::receive_listeners(p.new_side, soon());
    EXPECT_TRUE(got.peer_left);
    EXPECT_NE(got.error, "");
    EXPECT_TRUE(got.fds.empty());
}

TEST(handover_protocol, a_silent_peer_times_out_at_the_deadline) {
    pair p;
    const auto t0 = std::chrono::steady_clock::now();
    auto got = detail::receive_listeners(p.new_side, soon(200ms));
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_FALSE(got.peer_left);
    EXPECT_NE(got.error.find("in time"), std::string::npos) << got.error;
    EXPECT_GE(took, 190ms);
    EXPECT_LT(took, 2s);
}

TEST(handover_protocol, a_peer_that_is_not_sluice_is_refused) {
    pair p;
    ASSERT_EQ(::send(p.old_side, "HTTP/1.1 200 OK\r\n\r\n", 19, 0), 19);
    auto got = detail::receive_listeners(p.new_side, soon());
    EXPECT_FALSE(got.peer_left);
    EXPECT_NE(got.error.find("not a sluice server"), std::string::npos) << got.error;
}

TEST(handover_protocol, a_message_whose_roles_and_descriptors_disagree_is_refused) {
    pair p;
    ASSERT_EQ(::send(p.old_side, "SLUICE-HANDOVER/1 LL", 20, 0), 20);
    auto got = detail::receive_listeners(p.new_side, soon());
    EXPECT_NE(got.error.find("names 2 listeners but carries 0"), std::string::npos) << got.error;
    EXPECT_TRUE(got.fds.empty());
}

TEST(handover_protocol, an_unknown_listener_kind_is_refused_without_leaking_the_descriptor) {
    const int a = listening_socket();
    pair p;
    // A well-formed message but for its role letter: built by hand, with the descriptor.
    char text[] = "SLUICE-HANDOVER/1 X";
    iovec iov{text, sizeof text - 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &a, sizeof a);
    ASSERT_GT(::sendmsg(p.old_side, &msg, 0), 0);
    const std::size_t before = test::open_fds();
    auto got = detail::receive_listeners(p.new_side, soon());
    EXPECT_NE(got.error.find("unknown listener kind"), std::string::npos) << got.error;
    EXPECT_TRUE(got.fds.empty());
    EXPECT_EQ(test::open_fds(), before) << "the received descriptor was closed";
    ::close(a);
}

TEST(handover_protocol, nothing_or_too_much_to_send_is_refused) {
    pair p;
    EXPECT_EQ(detail::send_listeners(p.old_side, {}), -E2BIG);
    std::vector<handed_fd> many(detail::max_handed_fds + 1, handed_fd{listener_role::main, p.old_side});
    EXPECT_EQ(detail::send_listeners(p.old_side, many), -E2BIG);
}

TEST(handover_protocol, the_old_side_tells_every_answer_apart) {
    {
        pair p;
        ASSERT_EQ(detail::send_ack(p.new_side), 0);
        EXPECT_EQ(detail::wait_ack(p.old_side, -1, soon()), ack_result::acknowledged);
    }
    {
        pair p;
        ASSERT_EQ(::send(p.new_side, "NO", 2, 0), 2);
        EXPECT_EQ(detail::wait_ack(p.old_side, -1, soon()), ack_result::garbage);
    }
    {
        pair p;
        ::close(p.new_side);
        p.new_side = -1;
        EXPECT_EQ(detail::wait_ack(p.old_side, -1, soon()), ack_result::closed);
    }
    {
        pair p;
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_EQ(detail::wait_ack(p.old_side, -1, soon(150ms)), ack_result::timed_out);
        EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    }
    {
        pair p;
        const int wake = ::eventfd(1, EFD_CLOEXEC);
        EXPECT_EQ(detail::wait_ack(p.old_side, wake, soon(10s)), ack_result::interrupted);
        ::close(wake);
    }
}

TEST(inherited_listeners, a_socket_is_checked_against_the_configured_address) {
    const int fd = listening_socket();
    const std::uint16_t port = detail::bound_port(fd);
    // Blocking, as systemd passes them: the check makes it non-blocking.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    EXPECT_EQ(detail::check_inherited(fd, detail::resolve_listen_address("127.0.0.1:0")), "");
    EXPECT_NE(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    EXPECT_EQ(
        detail::check_inherited(fd, detail::resolve_listen_address("127.0.0.1:" + std::to_string(port))), "");
    const std::string other = detail::check_inherited(
        fd, detail::resolve_listen_address("127.0.0.1:" + std::to_string(port == 65535 ? 1 : port + 1)));
    EXPECT_NE(other.find("listens on 127.0.0.1:" + std::to_string(port)), std::string::npos) << other;
    EXPECT_NE(detail::check_inherited(fd, detail::resolve_listen_address("[::1]:0")), "");
    ::close(fd);
    const int udp = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_NE(
        detail::check_inherited(udp, detail::resolve_listen_address("127.0.0.1:0")).find("not a listening"),
        std::string::npos);
    ::close(udp);
    const int unbound = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_NE(detail::check_inherited(unbound, detail::resolve_listen_address("127.0.0.1:0")), "");
    ::close(unbound);
}

TEST(inherited_listeners, systemd_variables_for_another_process_are_ignored) {
    const auto addr = detail::resolve_listen_address("127.0.0.1:0");
    const std::string other_pid = "LISTEN_PID=" + std::to_string(::getpid() + 1);
    const char* env[] = {other_pid.c_str(), "LISTEN_FDS=1"};
    EXPECT_TRUE(detail::systemd_listeners(env, addr, nullptr).empty());
    const char* none[] = {"PATH=/bin"};
    EXPECT_TRUE(detail::systemd_listeners(none, addr, nullptr).empty());
}

TEST(inherited_listeners, a_bad_systemd_count_is_a_startup_error_naming_listen_fds) {
    const auto addr = detail::resolve_listen_address("127.0.0.1:0");
    const std::string pid = "LISTEN_PID=" + std::to_string(::getpid());
    for (const char* count : {"LISTEN_FDS=0", "LISTEN_FDS=x", "LISTEN_FDS=1x", "LISTEN_FDS=999"}) {
        const char* env[] = {pid.c_str(), count};
        try {
            detail::systemd_listeners(env, addr, nullptr);
            ADD_FAILURE() << count << " was accepted";
        } catch (const startup_error& e) {
            EXPECT_EQ(e.key(), "LISTEN_FDS") << count;
        }
    }
}

// Puts the given descriptors at 3, 4, 5, ... as systemd passes them (sd_listen_fds(3)), and
// gives those numbers back to whatever held them before when it goes.
class at_listen_fds {
public:
    explicit at_listen_fds(const std::vector<int>& fds) : count_(fds.size()) {
        // The sources may themselves be 3, 4, 5: copy them out of the way first.
        std::vector<int> copies;
        for (const int fd : fds) {
            copies.push_back(::fcntl(fd, F_DUPFD_CLOEXEC, 100));
        }
        for (std::size_t i = 0; i < count_; ++i) {
            const int target = 3 + static_cast<int>(i);
            saved_.push_back(::fcntl(target, F_DUPFD_CLOEXEC, 100)); // -1: it was not open
            EXPECT_EQ(::dup2(copies[i], target), target);
            ::close(copies[i]);
        }
    }
    ~at_listen_fds() {
        for (std::size_t i = 0; i < count_; ++i) {
            const int target = 3 + static_cast<int>(i);
            if (saved_[i] >= 0) {
                ::dup3(saved_[i], target, O_CLOEXEC);
                ::close(saved_[i]);
            } else {
                ::close(target);
            }
        }
    }
    at_listen_fds(const at_listen_fds&) = delete;
    at_listen_fds& operator=(const at_listen_fds&) = delete;

private:
    std::size_t count_;
    std::vector<int> saved_;
};

detail::socket_address address_of(int fd) {
    return detail::resolve_listen_address("127.0.0.1:" + std::to_string(detail::bound_port(fd)));
}

std::vector<listener_role> roles(const std::vector<handed_fd>& fds) {
    std::vector<listener_role> out;
    for (std::size_t i = 0; i < fds.size(); ++i) {
        EXPECT_EQ(fds[i].fd, 3 + static_cast<int>(i));
        out.push_back(fds[i].role);
    }
    return out;
}

// systemd's descriptors take their roles from LISTEN_FDNAMES ("admin", "tls"), and otherwise
// from the address they are bound to. systemd names every descriptor (by default after its
// socket unit), so any other name means "by address".
TEST(inherited_listeners, systemd_descriptors_get_their_role_by_name_or_by_address) {
    const int m = listening_socket();
    const int t = listening_socket();
    const int a = listening_socket();
    const auto main_addr = address_of(m);
    const auto tls_addr = address_of(t);
    const auto admin_addr = address_of(a);
    const std::string pid = "LISTEN_PID=" + std::to_string(::getpid());
    using enum listener_role;
    {
        // The names "tls" and "admin" win over the addresses: they are the operator's word.
        const at_listen_fds placed({a, m});
        const char* env[] = {pid.c_str(), "LISTEN_FDS=2", "LISTEN_FDNAMES=tls:admin"};
        EXPECT_EQ(roles(detail::systemd_listeners(env, main_addr, &admin_addr, &tls_addr)),
                  (std::vector<listener_role>{tls, admin}));
    }
    {
        // systemd's default names (the unit's): by address.
        const at_listen_fds placed({t, a, m});
        const char* env[] = {pid.c_str(), "LISTEN_FDS=3",
                             "LISTEN_FDNAMES=sluice.socket:sluice.socket:sluice.socket"};
        EXPECT_EQ(roles(detail::systemd_listeners(env, main_addr, &admin_addr, &tls_addr)),
                  (std::vector<listener_role>{tls, admin, main}));
    }
    {
        // No names at all: by address.
        const at_listen_fds placed({m, t, a});
        const char* env[] = {pid.c_str(), "LISTEN_FDS=3"};
        EXPECT_EQ(roles(detail::systemd_listeners(env, main_addr, &admin_addr, &tls_addr)),
                  (std::vector<listener_role>{main, tls, admin}));
    }
    {
        // Neither tls.listen nor admin.listen configured: a descriptor on another address is one
        // more public listener, and one named "tls" is still the TLS one.
        const at_listen_fds placed({m, t, a});
        const char* env[] = {pid.c_str(), "LISTEN_FDS=3", "LISTEN_FDNAMES=::tls"};
        EXPECT_EQ(roles(detail::systemd_listeners(env, main_addr, nullptr, nullptr)),
                  (std::vector<listener_role>{main, main, tls}));
    }
    ::close(m);
    ::close(t);
    ::close(a);
}

} // namespace
} // namespace sluice::testing
