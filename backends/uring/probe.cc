#include "probe.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace sluice::io::uring {

namespace {

// User data of the probe's own operations. Their low 32 bits name no record the driver's
// slab can ever hold (op_slab.h), so even a probe CQE that came late would be dropped.
constexpr std::uint64_t ud_base = 0xffff'fff0;
constexpr std::uint64_t ud_accept = ud_base + 1;
constexpr std::uint64_t ud_cancel_fd = ud_base + 2;
constexpr std::uint64_t ud_cancel_accept = ud_base + 3;
constexpr std::uint64_t ud_recv = ud_base + 4;
constexpr std::uint64_t ud_cancel_recv = ud_base + 5;
constexpr std::uint64_t ud_poll = ud_base + 6;
constexpr std::uint64_t ud_cancel_poll = ud_base + 7;
// A buffer group no driver uses; registered and unregistered within the probe.
constexpr std::uint16_t probe_bgid = 0x7ffe;
// Everything the probe waits for happens at once on a working kernel (loopback AF_UNIX
// sockets); the bound only keeps a broken kernel from hanging the start-up.
constexpr long probe_wait_ns = 200'000'000;

struct cqe_copy {
    std::uint64_t user_data;
    std::int32_t res;
    std::uint32_t flags;
};

/// Reaps CQEs until one with user_data `ud` and no IORING_CQE_F_MORE has been seen (or, with
/// `first_only`, any CQE for `ud`), or the probe's time bound passes. Every CQE goes to `seen`.
bool reap_until(io_uring& ring, std::uint64_t ud, bool first_only, std::vector<cqe_copy>& seen) {
    for (const cqe_copy& c : seen) {
        if (c.user_data == ud && (first_only || (c.flags & IORING_CQE_F_MORE) == 0)) {
            return true;
        }
    }
    for (int rounds = 0; rounds < 8; ++rounds) {
        io_uring_cqe* cqe = nullptr;
        __kernel_timespec ts{0, probe_wait_ns / 8};
        const int rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
        if (rc < 0 && rc != -ETIME && rc != -EINTR) {
            return false;
        }
        unsigned head = 0;
        unsigned n = 0;
        bool done = false;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++n;
            seen.push_back({cqe->user_data, cqe->res, cqe->flags});
            if (cqe->user_data == ud && (first_only || (cqe->flags & IORING_CQE_F_MORE) == 0)) {
                done = true;
            }
        }
        io_uring_cq_advance(&ring, n);
        if (done) {
            return true;
        }
    }
    return false;
}

const cqe_copy* first_for(const std::vector<cqe_copy>& seen, std::uint64_t ud) {
    for (const auto& c : seen) {
        if (c.user_data == ud) {
            return &c;
        }
    }
    return nullptr;
}

io_uring_sqe* next_sqe(io_uring& ring) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
        io_uring_submit(&ring);
        sqe = io_uring_get_sqe(&ring);
    }
    return sqe;
}

void cancel_and_reap(io_uring& ring, std::uint64_t target, std::uint64_t cancel_ud,
                     std::vector<cqe_copy>& seen) {
    if (io_uring_sqe* sqe = next_sqe(ring)) {
        io_uring_prep_cancel64(sqe, target, 0);
        io_uring_sqe_set_data64(sqe, cancel_ud);
    }
    reap_until(ring, target, false, seen);
    reap_until(ring, cancel_ud, false, seen);
}

// Multishot accept (5.19) and cancel-by-fd with IORING_ASYNC_CANCEL_ALL (5.19), on a
// listener nobody else can reach (an autobound abstract AF_UNIX name).
void probe_accept_and_cancel(io_uring& ring, const features& allowed, features& got) {
    got.multishot_accept = false;
    got.cancel_fd_all = false;
    const int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        return;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    socklen_t len = sizeof addr;
    // Binding with only the family autobinds an abstract name (unix(7)).
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(sa_family_t)) != 0 || ::listen(lfd, 4) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(lfd);
        return;
    }
    std::vector<cqe_copy> seen;
    bool armed = false;
    if (allowed.multishot_accept) {
        if (io_uring_sqe* sqe = next_sqe(ring)) {
            io_uring_prep_multishot_accept(sqe, lfd, nullptr, nullptr, SOCK_CLOEXEC);
            io_uring_sqe_set_data64(sqe, ud_accept);
            io_uring_submit(&ring);
            const int cfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (cfd >= 0 && ::connect(cfd, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
                reap_until(ring, ud_accept, true, seen);
            }
            if (const cqe_copy* c = first_for(seen, ud_accept)) {
                if (c->res >= 0) {
                    ::close(c->res);
                }
                // Kernels before 5.19 reject the flag with -EINVAL.
                got.multishot_accept = c->res >= 0 && (c->flags & IORING_CQE_F_MORE) != 0;
                armed = got.multishot_accept;
            } else {
                armed = true; // no answer yet: still pending, the cancel below ends it
            }
            if (cfd >= 0) {
                ::close(cfd);
            }
        }
    }
    if (allowed.cancel_fd_all) {
        if (io_uring_sqe* sqe = next_sqe(ring)) {
            io_uring_prep_cancel_fd(sqe, lfd, IORING_ASYNC_CANCEL_ALL);
            io_uring_sqe_set_data64(sqe, ud_cancel_fd);
            seen.clear();
            reap_until(ring, ud_cancel_fd, false, seen);
            if (armed) {
                reap_until(ring, ud_accept, false, seen);
            }
            // -EINVAL: the flags are unknown (before 5.19); -ENOENT: known, nothing matched.
            if (const cqe_copy* c = first_for(seen, ud_cancel_fd)) {
                got.cancel_fd_all = c->res >= 0 || c->res == -ENOENT;
                if (got.cancel_fd_all && armed) {
                    armed = false;
                }
            }
        }
    }
    if (armed) {
        cancel_and_reap(ring, ud_accept, ud_cancel_accept, seen);
    }
    ::close(lfd);
}

// Buffer rings (5.19), multishot recv (6.0) and multishot poll (5.13) on a socketpair.
void probe_receive(io_uring& ring, const features& allowed, features& got) {
    got.multishot_recv = false;
    got.multishot_poll = false;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        got.buffer_ring = false;
        return;
    }
    std::vector<cqe_copy> seen;
    if (allowed.multishot_poll) {
        if (io_uring_sqe* sqe = next_sqe(ring)) {
            io_uring_prep_poll_multishot(sqe, sv[1], POLLOUT); // writable at once
            io_uring_sqe_set_data64(sqe, ud_poll);
            reap_until(ring, ud_poll, true, seen);
            if (const cqe_copy* c = first_for(seen, ud_poll)) {
                got.multishot_poll = c->res > 0 && (c->flags & IORING_CQE_F_MORE) != 0;
                if (got.multishot_poll) {
                    cancel_and_reap(ring, ud_poll, ud_cancel_poll, seen);
                }
            }
        }
    }
    if (!allowed.buffer_ring) {
        got.buffer_ring = false;
    } else {
        const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        void* mem = ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            got.buffer_ring = false;
        } else {
            auto* br = static_cast<io_uring_buf_ring*>(mem);
            io_uring_buf_ring_init(br);
            io_uring_buf_reg reg{};
            reg.ring_addr = reinterpret_cast<std::uintptr_t>(br);
            reg.ring_entries = 2;
            reg.bgid = probe_bgid;
            got.buffer_ring = io_uring_register_buf_ring(&ring, &reg, 0) == 0;
            if (got.buffer_ring && allowed.multishot_recv) {
                std::array<char, 2 * 64> bytes{};
                for (unsigned short i = 0; i < 2; ++i) {
                    io_uring_buf_ring_add(br, bytes.data() + 64 * i, 64, i, io_uring_buf_ring_mask(2),
                                          static_cast<int>(i));
                }
                io_uring_buf_ring_advance(br, 2);
                if (io_uring_sqe* sqe = next_sqe(ring)) {
                    io_uring_prep_recv_multishot(sqe, sv[0], nullptr, 0, 0);
                    sqe->flags |= IOSQE_BUFFER_SELECT;
                    sqe->buf_group = probe_bgid;
                    io_uring_sqe_set_data64(sqe, ud_recv);
                    io_uring_submit(&ring);
                    [[maybe_unused]] const ssize_t w = ::write(sv[1], "x", 1);
                    seen.clear();
                    reap_until(ring, ud_recv, true, seen);
                    const cqe_copy* c = first_for(seen, ud_recv);
                    // Before 6.0 the flag in ioprio is rejected with -EINVAL.
                    got.multishot_recv = c != nullptr && c->res == 1 && (c->flags & IORING_CQE_F_MORE) != 0;
                    if (c == nullptr || (c->flags & IORING_CQE_F_MORE) != 0) {
                        cancel_and_reap(ring, ud_recv, ud_cancel_recv, seen);
                    }
                }
            }
            if (got.buffer_ring) {
                io_uring_unregister_buf_ring(&ring, probe_bgid);
            }
            ::munmap(mem, page);
        }
    }
    ::close(sv[0]);
    ::close(sv[1]);
}

int read_int_file(const char* path, int fallback) {
    std::ifstream f(path);
    int v = fallback;
    if (f >> v) {
        return v;
    }
    return fallback;
}

// "Seccomp: 2" in /proc/self/status: a filter is installed (seccomp(2)).
int seccomp_mode() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("Seccomp:", 0) == 0) {
            return std::atoi(line.c_str() + 8);
        }
    }
    return 0;
}

std::string memlock_limit() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        return "unknown";
    }
    if (rl.rlim_cur == RLIM_INFINITY) {
        return "unlimited";
    }
    return std::to_string(rl.rlim_cur / 1024) + " KiB";
}

} // namespace

std::string kernel_release() {
    utsname u{};
    if (::uname(&u) != 0) {
        return "unknown";
    }
    return u.release;
}

std::string explain_setup_error(int err, const char* what) {
    const std::string w(what);
    switch (err) {
    case EPERM:
    case EACCES: {
        // kernel.io_uring_disabled (6.6): 0 on, 1 only for io_uring_group and CAP_SYS_ADMIN, 2 off.
        const int disabled = read_int_file("/proc/sys/kernel/io_uring_disabled", 0);
        if (disabled == 2) {
            return w + ": io_uring is disabled by sysctl kernel.io_uring_disabled=2 (set it to 0, or use "
                       "backend = epoll)";
        }
        if (disabled == 1) {
            const int gid = read_int_file("/proc/sys/kernel/io_uring_group", -1);
            return w +
                   ": sysctl kernel.io_uring_disabled=1 allows io_uring only to CAP_SYS_ADMIN and group " +
                   std::to_string(gid) + " (kernel.io_uring_group); this process is neither";
        }
        if (seccomp_mode() == 2) {
            return w + ": refused (" + std::system_category().message(err) +
                   ") by a seccomp filter (Seccomp: 2 in /proc/self/status; container runtimes block "
                   "io_uring_setup by default: allow io_uring_setup, io_uring_enter and io_uring_register)";
        }
        return w + ": refused (" + std::system_category().message(err) +
               ") by a security policy (LSM: SELinux, AppArmor)";
    }
    case ENOSYS:
        if (seccomp_mode() == 2) {
            return w + ": ENOSYS under a seccomp filter (Seccomp: 2 in /proc/self/status): the filter blocks "
                       "the io_uring system calls";
        }
        return w + ": kernel " + kernel_release() +
               " has no io_uring (CONFIG_IO_URING is off, or it is older "
               "than 5.1)";
    case ENOMEM:
        return w + ": out of locked memory (ENOMEM): locked-memory limit RLIMIT_MEMLOCK=" + memlock_limit() +
               "; raise it with ulimit -l (LimitMEMLOCK= for a systemd unit, --ulimit memlock= for docker)";
    case EMFILE:
    case ENFILE:
        return w + ": out of file descriptors (" + std::system_category().message(err) + ")";
    default:
        return w + " failed: " + std::system_category().message(err);
    }
}

int setup_ring(io_uring& ring, unsigned sq, unsigned cq, const features& allowed, features& got,
               std::string& error) {
    struct attempt {
        unsigned flags;
        bool single_issuer;
        bool coop;
    };
    // SUBMIT_ALL (5.18) keeps submitting after an SQE that fails at submission time, so one
    // bad descriptor cannot hold back the rest of a batch; every kernel with COOP_TASKRUN
    // (5.19) has it.
    std::vector<attempt> attempts;
    if (allowed.single_issuer) {
        // DEFER_TASKRUN (6.1) needs SINGLE_ISSUER (6.0): completions are run only when the
        // owner thread enters with GETEVENTS, i.e. in wait(), never by an interrupt.
        // TASKRUN_FLAG (5.19): the kernel raises IORING_SQ_TASKRUN when it left completions
        // queued, which it does after 20 per enter (see driver::wait).
        attempts.push_back({IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
                            true, false});
    }
    if (allowed.coop_taskrun) {
        attempts.push_back({IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL, false, true});
    }
    attempts.push_back({0, false, false});
    int rc = -EINVAL;
    for (const attempt& a : attempts) {
        io_uring_params p{};
        p.flags = a.flags | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
        p.cq_entries = cq;
        rc = io_uring_queue_init_params(sq, &ring, &p);
        if (rc == 0) {
            got.single_issuer = a.single_issuer;
            got.coop_taskrun = a.coop;
            return 0;
        }
        if (rc != -EINVAL) {
            error = explain_setup_error(-rc, "io_uring_setup");
            return rc;
        }
    }
    error = "io_uring_setup: kernel " + kernel_release() + " rejects even the plainest ring (EINVAL)";
    return rc;
}

std::string check_required(io_uring& ring) {
    if ((ring.features & IORING_FEAT_FAST_POLL) == 0) {
        return "kernel " + kernel_release() +
               " lacks IORING_FEAT_FAST_POLL (5.7): every idle socket would hold a kernel worker thread";
    }
    io_uring_probe* p = io_uring_get_probe_ring(&ring);
    if (p == nullptr) {
        return "kernel " + kernel_release() +
               " cannot list its io_uring opcodes (IORING_REGISTER_PROBE, 5.6)";
    }
    struct named {
        int op;
        const char* name;
    };
    static constexpr named required[] = {
        {IORING_OP_POLL_ADD, "POLL_ADD"}, {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
        {IORING_OP_ACCEPT, "ACCEPT"},     {IORING_OP_SENDMSG, "SENDMSG"},
        {IORING_OP_SEND, "SEND"},         {IORING_OP_RECV, "RECV"},
    };
    std::string missing;
    for (const named& n : required) {
        if (!io_uring_opcode_supported(p, n.op)) {
            missing += missing.empty() ? "" : ", ";
            missing += n.name;
        }
    }
    io_uring_free_probe(p);
    if (!missing.empty()) {
        return "kernel " + kernel_release() + " lacks the io_uring opcodes " + missing;
    }
    return "";
}

void probe_optional(io_uring& ring, const features& allowed, features& got) {
    if (io_uring_probe* p = io_uring_get_probe_ring(&ring)) {
        got.msg_ring = allowed.msg_ring && io_uring_opcode_supported(p, IORING_OP_MSG_RING);
        io_uring_free_probe(p);
    }
    probe_accept_and_cancel(ring, allowed, got);
    probe_receive(ring, allowed, got);
}

std::string describe(const features& f) {
    std::string s;
    if (f.single_issuer) {
        s = "SINGLE_ISSUER+DEFER_TASKRUN";
    } else if (f.coop_taskrun) {
        s = "COOP_TASKRUN";
    } else {
        s = "no task-run flags";
    }
    s += f.multishot_accept ? ", multishot accept" : ", accept re-armed per connection";
    if (f.buffer_ring) {
        s += f.multishot_recv ? ", multishot recv with a buffer ring" : ", recv with a buffer ring";
    } else {
        s += ", poll + recv into the driver's pool (no buffer ring)";
    }
    s += f.multishot_poll ? ", multishot poll wake-up (eventfd)" : ", poll wake-up (eventfd)";
    s += f.cancel_fd_all ? ", cancel by fd" : ", cancel per operation";
    s += f.msg_ring ? ", msg_ring (not needed: wake() comes from threads without a ring)" : "";
    return s;
}

} // namespace sluice::io::uring
