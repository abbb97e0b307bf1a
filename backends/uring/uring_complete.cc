#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "driver_util.h"
#include "uring_driver.h"

namespace sluice::io::uring {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Reaping

void driver::reap(std::vector<completion>& out) noexcept {
    // A few rounds at most: the CQ may have overflowed into the kernel's list (NODROP, 5.5),
    // which the next enter with GETEVENTS moves back in.
    for (int round = 0; round < 4; ++round) {
        const unsigned ready = io_uring_cq_ready(&ring_);
        if (ready > 0) {
            try {
                // A CQE yields at most two completions (its own and a close it finishes):
                // with the room reserved, nothing below can fail halfway through the CQ.
                out.reserve(out.size() + 2 * std::size_t{ready});
            } catch (const std::bad_alloc&) {
                return; // the CQEs stay in the ring for the next wait
            }
            unsigned head = 0;
            unsigned n = 0;
            io_uring_cqe* cqe = nullptr;
            io_uring_for_each_cqe(&ring_, head, cqe) {
                if (n == ready) {
                    break;
                }
                ++n;
                on_cqe(*cqe, out);
            }
            io_uring_cq_advance(&ring_, n);
        }
        if (!io_uring_cq_has_overflow(&ring_)) {
            return;
        }
        io_uring_get_events(&ring_);
    }
}

void driver::on_cqe(const io_uring_cqe& cqe, std::vector<completion>& out) noexcept {
    std::uint32_t index = 0;
    op_record* r = ops_.find(cqe.user_data, index);
    if (r == nullptr) {
        // LIBURING_UDATA_TIMEOUT (liburing's own timeout before 5.11) or a late CQE of the
        // start-up probe. Not one of our receives (a receive's record lives until its final
        // CQE), so a buffer it names belongs to the probe's group, not to ours: leave it.
        return;
    }
    const bool final = (cqe.flags & IORING_CQE_F_MORE) == 0;
    if (r->kind == op_kind::wake) {
        std::uint64_t v = 0;
        [[maybe_unused]] const ssize_t n = ::read(wakefd_, &v, sizeof v);
        if (final) {
            ops_.free(index);
            wake_op_ = no_op; // re-armed by the next wait()
        }
        return;
    }
    const int fd = r->fd;
    fd_state& st = fds_[static_cast<std::size_t>(fd)];
    if (final) {
        // Detach first: a handler may arm the same kind of operation again.
        for (std::uint32_t* slot : {&st.recv_op, &st.hup_op, &st.send_op, &st.accept_op, &st.connect_op}) {
            if (*slot == index) {
                *slot = no_op;
            }
        }
    }
    switch (r->kind) {
    case op_kind::accept:
        on_accept(*r, cqe, final, st, out);
        break;
    case op_kind::recv:
        on_recv(*r, cqe, final, st, out);
        break;
    case op_kind::recv_poll:
        on_recv_poll(*r, cqe, st, out);
        break;
    case op_kind::hup_poll:
        on_hup(*r, cqe, st, out);
        break;
    case op_kind::send:
        if (!st.closing) {
            out.push_back({r->owner, op::send, false, cqe.res, no_buffer, nullptr});
        }
        break;
    case op_kind::connect_poll:
        on_connect(*r, cqe, st, out);
        break;
    case op_kind::cancel:
    case op_kind::wake:
        break;
    }
    if (final) {
        ops_.free(index);
        --st.inflight;
        if (st.closing && st.inflight == 0) {
            finish_close(fd, st, out);
        }
    }
}

void driver::on_accept(const op_record& r, const io_uring_cqe& cqe, bool final, fd_state& st,
                       std::vector<completion>& out) noexcept {
    if (st.closing) {
        // Accepted while the listener was being closed: the kernel has completed the handshake
        // and the client may have sent its request, so the owner takes it (its server answers
        // it in the drain) rather than have it reset.
        if (cqe.res >= 0) {
            out.push_back({r.owner, op::accept, true, cqe.res, no_buffer, nullptr});
        }
        if (final) {
            // The accept waited with an exclusive wake-up (the kernel wakes one waiter per
            // connection, the oldest first), and a cancellation that won over a wake-up ends
            // the accept without taking the connection: on a socket another process also holds
            // (a hand-over), that connection would wait in the queue with nobody woken for it.
            // Take what is queued now; what arrives later wakes the other holder.
            accept_backlog(r, out, close_drain_limit);
        }
        return;
    }
    if (cqe.res >= 0) {
        out.push_back({r.owner, op::accept, true, cqe.res, no_buffer, nullptr});
        if (final) {
            queue_rearm(r.fd, st); // one-shot accept, or a multishot the kernel ended (CQ overflow)
            if (!feat_.multishot_accept) {
                accept_backlog(r, out, accept_batch);
            }
        }
        return;
    }
    switch (-cqe.res) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
    case EINVAL:
    case EBADF:
    case ENOTSOCK:
    case EOPNOTSUPP:
        // Out of resources, or not a listener: the core decides (listener.cc retries later).
        if (final) {
            st.accepting = false;
        }
        out.push_back({r.owner, op::accept, !final, cqe.res, no_buffer, nullptr});
        return;
    default:
        // ECONNABORTED, EPROTO, EPERM (a firewall), EINTR, ECANCELED: that connection is gone,
        // the listener is fine.
        if (final && st.accepting) {
            queue_rearm(r.fd, st);
        }
        return;
    }
}

void driver::accept_backlog(const op_record& r, std::vector<completion>& out, int limit) noexcept {
    // Takes up to limit queued connections with accept4(2). Without multishot accept (before
    // 5.19) one SQE accepts one connection per loop iteration; a burst would wait in the
    // backlog for as many iterations. The SQE's completion says the listener is busy: take
    // what else is queued, as many as the epoll driver would. And when a closing listener's
    // accept ends (on_accept). Only on a non-blocking listener, which cannot stall.
    const int flags = ::fcntl(r.fd, F_GETFL);
    if (flags < 0 || (flags & O_NONBLOCK) == 0) {
        return;
    }
    for (int i = 0; i < limit; ++i) {
        const int fd = ::accept4(r.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; // EAGAIN: drained; anything else: the armed SQE will report it
        }
        try {
            out.push_back({r.owner, op::accept, true, fd, no_buffer, nullptr});
        } catch (const std::bad_alloc&) {
            ::close(fd);
            return;
        }
    }
}

void driver::on_recv(const op_record& r, const io_uring_cqe& cqe, bool final, fd_state& st,
                     std::vector<completion>& out) noexcept {
    const bool has_buffer = (cqe.flags & IORING_CQE_F_BUFFER) != 0;
    const std::uint32_t bid = cqe.flags >> IORING_CQE_BUFFER_SHIFT;
    if (st.closing) {
        if (has_buffer) {
            bufs_.recycle(bid);
        }
        return;
    }
    if (cqe.res > 0 && has_buffer && bufs_.valid(bid)) {
        bufs_.lend(bid);
        bool more = true;
        if (final) {
            // One-shot recv, or a multishot the kernel ended with data (CQ overflow).
            if (st.receiving) {
                queue_rearm(r.fd, st);
            } else {
                more = false; // this was the paused receive's last word
                arm_hup(r.fd, st);
            }
        }
        out.push_back({r.owner, op::recv, more, cqe.res, bid, bufs_.data(bid)});
        return;
    }
    if (has_buffer) {
        bufs_.recycle(bid);
    }
    if (!final) {
        return;
    }
    switch (cqe.res) {
    case -ENOBUFS:
        // The ring ran dry: the multishot has ended, the bytes wait in the socket.
        if (st.receiving) {
            queue_starved(r.fd, st);
            return;
        }
        receiving_ended(r.fd, st, r.owner, out);
        return;
    case -ECANCELED:
    case -EINTR:
    case -EAGAIN:
        if (st.receiving) {
            queue_rearm(r.fd, st); // recv() came again while the cancellation was on its way
            return;
        }
        receiving_ended(r.fd, st, r.owner, out);
        return;
    default:
        // End of stream (0) or a socket error: receiving is over.
        st.receiving = false;
        out.push_back({r.owner, op::recv, false, cqe.res > 0 ? -EIO : cqe.res, no_buffer, nullptr});
        return;
    }
}

void driver::on_recv_poll(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                          std::vector<completion>& out) noexcept {
    if (st.closing) {
        return;
    }
    if (!st.receiving) {
        receiving_ended(r.fd, st, r.owner, out);
        return;
    }
    if (cqe.res < 0) {
        if (cqe.res == -ECANCELED || cqe.res == -EINTR || cqe.res == -EAGAIN) {
            queue_rearm(r.fd, st);
            return;
        }
        st.receiving = false;
        out.push_back({r.owner, op::recv, false, cqe.res, no_buffer, nullptr});
        return;
    }
    std::uint32_t bid = 0;
    if (!bufs_.take(bid)) {
        queue_starved(r.fd, st);
        return;
    }
    const ssize_t n = ::recv(r.fd, bufs_.data(bid), bufs_.buffer_bytes(), 0);
    if (n > 0) {
        bufs_.lend(bid);
        queue_rearm(r.fd, st); // poll again: level-triggered, so unread bytes fire it at once
        out.push_back({r.owner, op::recv, true, static_cast<std::int32_t>(n), bid, bufs_.data(bid)});
        return;
    }
    const int err = n < 0 ? errno : 0;
    bufs_.untake(bid);
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
        queue_rearm(r.fd, st);
        return;
    }
    st.receiving = false;
    out.push_back({r.owner, op::recv, false, -err, no_buffer, nullptr});
}

void driver::on_hup(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                    std::vector<completion>& out) noexcept {
    if (st.closing || r.canceling || st.receiving || cqe.res == -ECANCELED) {
        return; // receiving resumed (it will see the hang-up itself), or the fd is closing
    }
    int result = cqe.res < 0 ? cqe.res : 0;
    if (cqe.res > 0 && (cqe.res & POLLERR) != 0) {
        result = -socket_error(r.fd);
    }
    // Rule 6: a paused receiver hears the peer leave, as a final recv completion.
    out.push_back({r.owner, op::recv, false, result, no_buffer, nullptr});
}

void driver::on_connect(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                        std::vector<completion>& out) noexcept {
    if (st.closing) {
        return;
    }
    // The poll for writability of a connect in progress (driver::connect): its outcome is in
    // SO_ERROR (connect(2)).
    const int result = cqe.res >= 0 ? -socket_error(r.fd) : cqe.res;
    out.push_back({r.owner, op::connect, false, result, no_buffer, nullptr});
}

void driver::receiving_ended(int fd, fd_state& st, void* owner, std::vector<completion>& out) noexcept {
    emit(out, {owner, op::recv, false, -ECANCELED, no_buffer, nullptr});
    arm_hup(fd, st);
}

void driver::finish_close(int fd, fd_state& st, std::vector<completion>& out) noexcept {
    ::close(fd);
    void* owner = st.close_owner;
    const std::uint32_t next_generation = st.generation + 1;
    st = fd_state{};
    st.generation = next_generation;
    emit(out, {owner, op::close, false, 0, no_buffer, nullptr});
}

} // namespace sluice::io::uring
