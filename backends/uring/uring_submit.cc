#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "driver_util.h"
#include "uring_driver.h"

namespace sluice::io::uring {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Bookkeeping

driver::fd_state* driver::state(int fd) noexcept {
    if (fd < 0) {
        return nullptr;
    }
    const auto i = static_cast<std::size_t>(fd);
    if (i >= fds_.size()) {
        try {
            fds_.resize(std::max(i + 1, fds_.size() * 2));
        } catch (const std::bad_alloc&) {
            return nullptr;
        }
    }
    return &fds_[i];
}

io_uring_sqe* driver::get_sqe() noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
        // The SQ is full: this iteration queued more than a ring's worth; submit what is there.
        io_uring_submit(&ring_);
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

std::uint32_t driver::start_op(op_kind kind, int fd, void* owner, fd_state* st) noexcept {
    const std::uint32_t i = ops_.alloc();
    if (i == no_op) {
        return no_op;
    }
    op_record& r = ops_.at(i);
    r.kind = kind;
    r.fd = fd;
    r.owner = owner;
    if (st != nullptr) {
        ++st->inflight;
    }
    return i;
}

void driver::abort_op(std::uint32_t index, fd_state* st) noexcept {
    ops_.free(index);
    if (st != nullptr) {
        --st->inflight;
    }
}

void driver::set_data(io_uring_sqe* sqe, std::uint32_t index) noexcept {
    io_uring_sqe_set_data64(sqe, ops_.user_data_of(index));
}

// ---------------------------------------------------------------------------------------------
// Arming

int driver::arm_accept(int fd, fd_state& st) noexcept {
    const std::uint32_t i = start_op(op_kind::accept, fd, st.owner, &st);
    if (i == no_op) {
        return -ENOMEM;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, &st);
        return -EAGAIN;
    }
    if (feat_.multishot_accept) {
        io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } else {
        io_uring_prep_accept(sqe, fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    }
    set_data(sqe, i);
    st.accept_op = i;
    return 0;
}

int driver::arm_recv(int fd, fd_state& st) noexcept {
    const bool ring = bufs_.kind() == buffer_pool::mode::ring;
    const std::uint32_t i = start_op(ring ? op_kind::recv : op_kind::recv_poll, fd, st.owner, &st);
    if (i == no_op) {
        return -ENOMEM;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, &st);
        return -EAGAIN;
    }
    if (ring) {
        // Length 0: the buffer's own size (io_uring_prep_recv_multishot(3) requires it).
        if (feat_.multishot_recv) {
            io_uring_prep_recv_multishot(sqe, fd, nullptr, 0, 0);
        } else {
            io_uring_prep_recv(sqe, fd, nullptr, 0, 0);
        }
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = bufs_.group();
    } else {
        io_uring_prep_poll_add(sqe, fd, POLLIN | POLLRDHUP);
    }
    set_data(sqe, i);
    st.recv_op = i;
    return 0;
}

void driver::arm_hup(int fd, fd_state& st) noexcept {
    if (st.hup_op != no_op || st.closing) {
        return;
    }
    const std::uint32_t i = start_op(op_kind::hup_poll, fd, st.owner, &st);
    if (i == no_op) {
        return;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, &st);
        return;
    }
    // POLLERR and POLLHUP are always reported (poll(2)); POLLRDHUP is the peer's FIN. POLLIN
    // is left out on purpose: more bytes while paused are not a hang-up.
    io_uring_prep_poll_add(sqe, fd, POLLRDHUP);
    set_data(sqe, i);
    st.hup_op = i;
}

void driver::arm_wake() noexcept {
    const std::uint32_t i = start_op(op_kind::wake, -1, nullptr, nullptr);
    if (i == no_op) {
        return;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, nullptr);
        return;
    }
    if (feat_.multishot_poll) {
        io_uring_prep_poll_multishot(sqe, wakefd_, POLLIN);
    } else {
        io_uring_prep_poll_add(sqe, wakefd_, POLLIN);
    }
    set_data(sqe, i);
    wake_op_ = i;
}

void driver::cancel_op(std::uint32_t target, fd_state& st) noexcept {
    op_record& t = ops_.at(target);
    if (t.canceling) {
        return;
    }
    t.canceling = true;
    const std::uint32_t i = start_op(op_kind::cancel, t.fd, nullptr, &st);
    if (i == no_op) {
        return;
    }
    io_uring_sqe* sqe = get_sqe();
    if (sqe == nullptr) {
        abort_op(i, &st);
        return;
    }
    io_uring_prep_cancel64(sqe, ops_.user_data_of(target), 0);
    set_data(sqe, i);
}

void driver::cancel_all(int fd, fd_state& st) noexcept {
    for (std::uint32_t op : {st.recv_op, st.hup_op, st.send_op, st.accept_op, st.connect_op}) {
        if (op != no_op) {
            ops_.at(op).canceling = true;
        }
    }
    if (feat_.cancel_fd_all) {
        // One SQE for everything on the descriptor (IORING_ASYNC_CANCEL_FD|ALL, 5.19).
        const std::uint32_t i = start_op(op_kind::cancel, fd, nullptr, &st);
        if (i != no_op) {
            if (io_uring_sqe* sqe = get_sqe()) {
                io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
                set_data(sqe, i);
                return;
            }
            abort_op(i, &st);
        }
    } else {
        bool all_asked = true;
        for (std::uint32_t op : {st.recv_op, st.hup_op, st.send_op, st.accept_op, st.connect_op}) {
            if (op == no_op) {
                continue;
            }
            ops_.at(op).canceling = false; // cancel_op() sets it again once the SQE is queued
            const std::uint32_t before = st.inflight;
            cancel_op(op, st);
            all_asked = all_asked && st.inflight > before;
        }
        if (all_asked) {
            return;
        }
    }
    // No SQE or no memory for the cancellation: shutting the socket down ends every pending
    // receive (0), poll (POLLHUP) and send (EPIPE) just as surely, and close must finish.
    ::shutdown(fd, SHUT_RDWR);
}

void driver::queue_rearm(int fd, fd_state& st) noexcept {
    if (st.rearm_queued) {
        return;
    }
    try {
        rearm_.push_back({fd, st.generation});
        st.rearm_queued = true;
    } catch (const std::bad_alloc&) {
        log_to(log_, log_level::error, "uring: loop {}: out of memory re-arming fd {}", loop_index_, fd);
    }
}

void driver::queue_starved(int fd, fd_state& st) noexcept {
    ++starved_total_;
    note_starved();
    if (st.starved) {
        return;
    }
    try {
        starved_.push_back({fd, st.generation});
        st.starved = true;
    } catch (const std::bad_alloc&) {
        queue_rearm(fd, st);
    }
}

void driver::note_starved() noexcept {
    if (dry_) {
        return;
    }
    dry_ = true;
    ++dry_episodes_;
    log_to(
        log_, log_level::debug,
        "uring: loop {}: receive buffers ran out ({} of {} B); receives wait for the core to give some back",
        loop_index_, bufs_.count(), bufs_.buffer_bytes());
}

void driver::run_rearms(std::vector<completion>& out) noexcept {
    rearm_now_.swap(rearm_);
    for (const fd_ref ref : rearm_now_) {
        fd_state& st = fds_[static_cast<std::size_t>(ref.fd)];
        if (st.generation != ref.generation) {
            continue; // closed (and maybe reused) since
        }
        st.rearm_queued = false;
        if (st.closing) {
            continue;
        }
        if (st.accepting && st.accept_op == no_op) {
            if (const int rc = arm_accept(ref.fd, st); rc < 0) {
                st.accepting = false;
                emit(out, {st.owner, op::accept, false, rc, no_buffer, nullptr});
            }
        }
        if (st.receiving && st.recv_op == no_op && !st.starved) {
            if (const int rc = arm_recv(ref.fd, st); rc < 0) {
                st.receiving = false;
                emit(out, {st.owner, op::recv, false, rc, no_buffer, nullptr});
            }
        }
    }
    rearm_now_.clear();
    // Receives that found no buffer: as many as there are buffers now, oldest first.
    std::uint32_t budget = bufs_.available();
    while (budget > 0 && starved_head_ < starved_.size()) {
        const fd_ref ref = starved_[starved_head_++];
        fd_state& st = fds_[static_cast<std::size_t>(ref.fd)];
        if (st.generation != ref.generation) {
            continue;
        }
        st.starved = false;
        if (st.closing || !st.receiving || st.recv_op != no_op) {
            continue;
        }
        --budget;
        if (const int rc = arm_recv(ref.fd, st); rc < 0) {
            st.receiving = false;
            emit(out, {st.owner, op::recv, false, rc, no_buffer, nullptr});
        }
    }
    if (starved_head_ == starved_.size()) {
        starved_.clear();
        starved_head_ = 0;
        dry_ = false;
    } else if (starved_head_ > 1024 && starved_head_ * 2 > starved_.size()) {
        starved_.erase(starved_.begin(), starved_.begin() + static_cast<std::ptrdiff_t>(starved_head_));
        starved_head_ = 0;
    }
}

} // namespace sluice::io::uring
