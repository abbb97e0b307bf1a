#include "uring_driver.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "driver_util.h"

namespace sluice::io::uring {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Creation

std::unique_ptr<io::driver> driver::create(const driver_options& options, std::string& error) {
    return create_with(options, features{}, error);
}

std::unique_ptr<driver> driver::create_with(const driver_options& options, const features& allowed,
                                            std::string& error) {
    std::unique_ptr<driver> d;
    try {
        d.reset(new driver(options));
    } catch (const std::bad_alloc&) {
        error = "uring: out of memory";
        return nullptr;
    }
    if (d->init(allowed, error) < 0) {
        return nullptr;
    }
    return d;
}

driver::driver(const driver_options& options)
    : log_(options.log), loop_index_(options.loop_index), options_(options) {
    fds_.resize(1024);
    pending_.reserve(64);
    rearm_.reserve(256);
    rearm_now_.reserve(256);
}

int driver::init(const features& allowed, std::string& error) {
    int rc = setup_ring(ring_, sq_entries, cq_entries, allowed, feat_, error);
    if (rc < 0) {
        return rc;
    }
    ring_ready_ = true;
    if (std::string why = check_required(ring_); !why.empty()) {
        error = std::move(why);
        return -ENOSYS;
    }
    probe_optional(ring_, allowed, feat_);

    const auto geometry = buffer_pool::choose(options_.recv_buffer_bytes, options_.recv_buffer_count);
    rc = bufs_.init(&ring_, feat_.buffer_ring ? buffer_pool::mode::ring : buffer_pool::mode::user, geometry,
                    recv_bgid, error);
    if (rc < 0) {
        return rc;
    }
    if (!feat_.buffer_ring) {
        feat_.multishot_recv = false; // receives poll, then recv() into the pool
    }
    wakefd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakefd_ < 0) {
        const int err = errno;
        error = std::string("eventfd: ") + std::system_category().message(err);
        return -err;
    }
    arm_wake();
    if (wake_op_ == no_op) {
        error = "uring: cannot arm the wake-up poll";
        return -ENOMEM;
    }
    rc = io_uring_submit(&ring_);
    if (rc < 0) {
        error = explain_setup_error(-rc, "io_uring_enter");
        return rc;
    }
    log_features();
    return 0;
}

void driver::log_features() const {
    // Once per loop: loop 0 says it at info level, the others only when debugging.
    const log_level level = loop_index_ == 0 ? log_level::info : log_level::debug;
    log_to(log_, level, "uring: loop {}: kernel {}, {}; {} receive buffers of {} B; SQ {} / CQ {} entries",
           loop_index_, kernel_release(), describe(feat_), bufs_.count(), bufs_.buffer_bytes(),
           ring_.sq.ring_entries, ring_.cq.ring_entries);
}

driver::~driver() {
    if (dry_episodes_ > 0) {
        log_to(log_, log_level::debug,
               "uring: loop {}: receive buffers ran out {} times ({} receives waited)", loop_index_,
               dry_episodes_, starved_total_);
    }
    // Closing the ring cancels whatever is still in flight (nothing, after a clean stop: the
    // core closes every descriptor first). The buffer memory goes after the ring (members).
    if (ring_ready_) {
        io_uring_queue_exit(&ring_);
    }
    if (wakefd_ >= 0) {
        ::close(wakefd_);
    }
}

// ---------------------------------------------------------------------------------------------
// Verbs

int driver::accept(int listen_fd, void* owner) noexcept {
    fd_state* st = state(listen_fd);
    if (st == nullptr) {
        return -ENOMEM;
    }
    if (st->closing) {
        return -EBADF;
    }
    st->owner = owner;
    st->accepting = true;
    if (st->accept_op != no_op || st->rearm_queued) {
        return 0;
    }
    return arm_accept(listen_fd, *st);
}

int driver::recv(int fd, void* owner) noexcept {
    fd_state* st = state(fd);
    if (st == nullptr) {
        return -ENOMEM;
    }
    if (st->closing) {
        return -EBADF;
    }
    st->owner = owner;
    st->receiving = true;
    if (st->hup_op != no_op) {
        cancel_op(st->hup_op, *st); // receiving again reports the hang-up itself
    }
    if (st->recv_op != no_op || st->rearm_queued || st->starved) {
        return 0; // armed already, or about to be (a cancelled one is re-armed when it ends)
    }
    const int rc = arm_recv(fd, *st);
    if (rc < 0) {
        st->receiving = false;
    }
    return rc;
}

void driver::pause_recv(int fd, void* owner) noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= fds_.size()) {
        return;
    }
    fd_state& st = fds_[static_cast<std::size_t>(fd)];
    if (st.closing || !st.receiving) {
        return;
    }
    st.receiving = false;
    if (st.recv_op != no_op) {
        cancel_op(st.recv_op, st); // its final CQE reports more == false, then the hang-up watch starts
        return;
    }
    // Nothing in flight (a re-arm or a buffer was awaited): the pause takes effect now.
    receiving_ended(fd, st, owner, pending_);
}

int driver::send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept {
    fd_state* st = state(fd);
    if (st == nullptr) {
        return -ENOMEM;
    }
    if (st->closing) {
        return -EBADF;
    }
    if (st->send_op != no_op || iovcnt < 0) {
        return st->send_op != no_op ? -EBUSY : -EINVAL; // rule 7: one send per fd at a time
    }
    st->owner = owner;
    const std::uint32_t i = start_op(op_kind::send, fd, owner, st);
    if (i == no_op) {
        return -ENOMEM;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, st);
        return -EAGAIN;
    }
    if (iovcnt == 1) {
        // The common case (one buffer of serialized responses): SEND needs no msghdr.
        io_uring_prep_send(sqe, fd, iov[0].iov_base, std::min(iov[0].iov_len, max_send_bytes), MSG_NOSIGNAL);
    } else {
        // Head and body from two places in one call: the writev of io_uring is SENDMSG.
        op_record& r = ops_.at(i);
        r.msg = msghdr{};
        r.msg.msg_iov = const_cast<iovec*>(iov);
        r.msg.msg_iovlen = static_cast<std::size_t>(iovcnt);
        io_uring_prep_sendmsg(sqe, fd, &r.msg, MSG_NOSIGNAL);
    }
    set_data(sqe, i);
    st->send_op = i;
    return 0;
}

int driver::connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept {
    fd_state* st = state(fd);
    if (st == nullptr) {
        return -ENOMEM;
    }
    if (st->closing) {
        return -EBADF;
    }
    if (st->connect_op != no_op) {
        return -EALREADY;
    }
    st->owner = owner;
    // A plain connect(), not IORING_OP_CONNECT: on loopback (and any peer that answers within
    // the call) the handshake is over when it returns, and the ring would post that behind
    // every completion already queued — after a burst of requests, the whole burst. Reported
    // with the next wait instead; one that is still in progress is polled for by the ring.
    int result = 0;
    if (::connect(fd, addr, len) != 0) {
        if (errno != EINPROGRESS) {
            return -errno; // the core reports it as the connect's result (as epoll's driver)
        }
        pollfd p{fd, POLLOUT, 0};
        result = ::poll(&p, 1, 0) == 1 ? -socket_error(fd) : -EINPROGRESS;
    }
    if (result != -EINPROGRESS) {
        try {
            pending_.push_back({owner, op::connect, false, result, no_buffer, nullptr});
        } catch (const std::bad_alloc&) {
            return -ENOMEM;
        }
        return 0;
    }
    const std::uint32_t i = start_op(op_kind::connect_poll, fd, owner, st);
    if (i == no_op) {
        return -ENOMEM;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, st);
        return -EAGAIN;
    }
    io_uring_prep_poll_add(sqe, fd, POLLOUT);
    set_data(sqe, i);
    st->connect_op = i;
    return 0;
}

int driver::shutdown_send(int fd) noexcept {
    // No send is in flight (the caller's rule), so nothing queued in the ring can follow the FIN.
    return ::shutdown(fd, SHUT_WR) == 0 ? 0 : -errno;
}

void driver::close(int fd, void* owner) noexcept {
    fd_state* st = state(fd);
    if (st == nullptr) {
        ::close(fd);
        emit(pending_, {owner, op::close, false, 0, no_buffer, nullptr});
        return;
    }
    if (st->closing) {
        return;
    }
    st->closing = true;
    st->close_owner = owner;
    st->receiving = false;
    st->accepting = false;
    if (st->inflight == 0) {
        finish_close(fd, *st, pending_);
        return;
    }
    // The descriptor stays open until every operation on it has ended: a cancellation by fd
    // needs the fd, and its number must not be reused while CQEs for it can still come.
    cancel_all(fd, *st);
}

void driver::release(std::uint32_t buffer) noexcept {
    bufs_.give_back(buffer);
}

void driver::wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t r = ::write(wakefd_, &one, sizeof one);
}

// ---------------------------------------------------------------------------------------------
// Waiting and reaping

int driver::wait(std::chrono::nanoseconds timeout, std::vector<completion>& out) noexcept {
    const std::size_t before = out.size();
    try {
        out.insert(out.end(), pending_.begin(), pending_.end());
    } catch (const std::bad_alloc&) {
        return -ENOMEM;
    }
    pending_.clear();
    // Buffers the core gave back since the last wait become visible to the kernel before
    // anything is submitted that could want one.
    bufs_.publish();
    run_rearms(out);
    if (wake_op_ == no_op) {
        arm_wake();
    }
    if (out.size() > before || starved_head_ < starved_.size()) {
        timeout = std::chrono::nanoseconds(0); // something to report, or receives to re-arm
    }
    const int rc = enter(timeout);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        if (!enter_error_logged_) {
            enter_error_logged_ = true;
            // -EEXIST: a thread other than the ring's creator entered it (SINGLE_ISSUER, 6.0).
            log_to(log_, log_level::error, "uring: loop {}: io_uring_enter: {}", loop_index_,
                   std::system_category().message(-rc));
        }
        if (out.size() == before) {
            return rc;
        }
    }
    reap(out);
    run_queued(before, out);
    return static_cast<int>(out.size() - before);
}

void driver::run_queued(std::size_t before, std::vector<completion>& out) noexcept {
    // With DEFER_TASKRUN an enter that waits for one completion runs at most 20 of those the
    // kernel queued for this thread (IO_LOCAL_TW_DEFAULT_MAX, Linux 6.11): after a burst the
    // rest came out 20 per loop iteration, and whatever was queued behind the burst waited for
    // all of those iterations. The kernel says when it left some (IORING_SQ_TASKRUN); an enter
    // that asks for a whole batch without waiting runs up to that many. A batch is what one
    // wait may report: the receive buffers it can lend (rule 5).
    if (!feat_.single_issuer) {
        return;
    }
    const std::size_t batch = options_.recv_buffer_count;
    for (int round = 0; round < 4; ++round) {
        const std::size_t reported = out.size() - before;
        if (reported >= batch || (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) == 0) {
            return;
        }
        __kernel_timespec none{};
        io_uring_cqe* cqe = nullptr;
        (void)io_uring_submit_and_wait_timeout(&ring_, &cqe, static_cast<unsigned>(batch - reported), &none,
                                               nullptr);
        reap(out);
    }
}

int driver::enter(std::chrono::nanoseconds timeout) noexcept {
    if (timeout.count() == 0) {
        // Submits and, with DEFER_TASKRUN, runs the completions the kernel queued for us.
        return io_uring_submit_and_get_events(&ring_);
    }
    if (timeout.count() < 0) {
        return io_uring_submit_and_wait(&ring_, 1);
    }
    // Ring-native timeout: IORING_ENTER_EXT_ARG (5.11) passes it to this one io_uring_enter;
    // liburing queues a timeout SQE instead on older kernels.
    __kernel_timespec ts{};
    ts.tv_sec = timeout.count() / 1'000'000'000;
    ts.tv_nsec = timeout.count() % 1'000'000'000;
    io_uring_cqe* cqe = nullptr;
    return io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
}

} // namespace sluice::io::uring
