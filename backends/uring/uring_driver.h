// The io_uring driver: a completion backend (Seastar's reactor_backend_uring idea), one
// ring per loop, created on the loop's thread so that SINGLE_ISSUER and DEFER_TASKRUN
// hold (probe.h lists what is probed and what each missing feature falls back to).
//
// What the verbs of backend.h become on the ring:
//   accept      one multishot ACCEPT per listener, re-armed inside the driver when it ends
//               for a reason the core need not hear about (CQ overflow, ECONNABORTED)
//   recv        one multishot RECV with IOSQE_BUFFER_SELECT per connection: the kernel
//               picks a buffer from the ring only when bytes arrive (buffer_ring.h)
//   pause_recv  cancel that RECV; when its last CQE has come, a POLL_ADD(POLLRDHUP)
//               watches for the peer leaving, so a paused receiver still hears a
//               hang-up (rule 6)
//   send        one SEND (one iovec) or SENDMSG (several) with MSG_NOSIGNAL, queued in
//               the SQ and submitted with everything else by the next wait()
//   connect     connect(2) itself, then poll(2) once: a handshake already over (loopback)
//               is reported by the next wait(), not behind every CQE already queued; one
//               still in progress gets a POLL_ADD(POLLOUT), then SO_ERROR
//   close       one ASYNC_CANCEL by fd with IORING_ASYNC_CANCEL_ALL; when the final CQE
//               of every operation on the fd has arrived, close(2) and op::close (rule 4)
//   wait        one io_uring_enter: submit, then wait for a CQE or the timeout (EXT_ARG,
//               5.11, or liburing's timeout SQE before it); reap every CQE. With
//               DEFER_TASKRUN the kernel runs only 20 queued completions per such enter
//               (6.11+) and flags the rest (IORING_SQ_TASKRUN): enters that do not wait
//               run them, up to a batch (recv_buffer_count) per wait
//   wake        a write to an eventfd that a (multishot) POLL_ADD on the ring watches:
//               the only way another thread can reach a SINGLE_ISSUER ring
//
// The buffer ring running dry is not an error for the core: a multishot RECV that ends
// with -ENOBUFS is re-armed by the driver itself, at the start of the next wait(), after
// the core has given every lent buffer back (rule 5), and at most as many as there are
// free buffers per wait, oldest first, so that a burst of N connections against B
// buffers costs about N/B loop iterations, not N/B rounds of N failing receives. Until
// then the bytes wait in the socket; nothing is lost.
//
// The receive side of one descriptor (what the core is told, in brackets):
//
//                  recv()
//   [not armed] ----------> ARMED: one multishot RECV in flight
//                             |  a CQE with data: [recv n, more]
//                             |  final CQE with data, or -ECANCELED: re-armed at the next wait
//                             |  final 0 or -errno: [recv 0|-errno, no more] --> not armed
//                             |
//                             +-- -ENOBUFS --> STARVED: queued, re-armed oldest first, at most
//                             |                one per free buffer per wait() --> ARMED
//                             |
//                             +-- pause_recv(): cancel; final CQE: [recv -ECANCELED, no more]
//                                   --> HUP WATCH: POLL_ADD(POLLRDHUP)
//                                         the peer leaves: [recv 0|-errno, no more]
//                                         recv(): cancel the poll --> ARMED
//
//   any state -- close() --> CLOSING: cancel everything on the fd, report nothing more;
//                            after the last final CQE: close(2), [op::close]
//
// Per-descriptor state: which operations are in flight (to cancel them), how many final
// CQEs are still due (to know when close may finish), and what the core asked for
// (receiving, accepting). A generation guards the lists of descriptors to re-arm against
// a descriptor number that was closed and reused meanwhile.
//
// Files: uring_driver.cc (creation, the verbs, wait), uring_submit.cc (arming, cancelling,
// re-arming), uring_complete.cc (reaping CQEs into completions), buffer_ring.{h,cc},
// op_slab.h, probe.{h,cc}, and uring_backend.cc (the registration and its probe).
#pragma once

#include <liburing.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>

#include "buffer_ring.h"
#include "op_slab.h"
#include "probe.h"

namespace sluice {
class logger;
}

namespace sluice::io::uring {

class driver final : public io::driver {
public:
    static std::unique_ptr<io::driver> create(const driver_options& options, std::string& error);
    /// As create(), using only the features in `allowed` (the tests force each fallback).
    static std::unique_ptr<driver> create_with(const driver_options& options, const features& allowed,
                                               std::string& error);
    ~driver() override;
    driver(const driver&) = delete;
    driver& operator=(const driver&) = delete;

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

    /// What this ring uses (the probed features, within what was allowed).
    const features& active() const noexcept { return feat_; }
    const buffer_pool& buffers() const noexcept { return bufs_; }
    /// Receives that found no free buffer and waited for one (-ENOBUFS, or an empty pool).
    std::uint64_t starved_receives() const noexcept { return starved_total_; }

private:
    struct fd_state {
        void* owner = nullptr;
        void* close_owner = nullptr;
        std::uint32_t generation = 0;
        std::uint32_t inflight = 0; ///< operations whose final CQE is still due
        std::uint32_t recv_op = no_op;
        std::uint32_t hup_op = no_op;
        std::uint32_t send_op = no_op;
        std::uint32_t accept_op = no_op;
        std::uint32_t connect_op = no_op;
        bool receiving = false; ///< recv() armed it and no pause or end came since
        bool accepting = false;
        bool closing = false;
        bool rearm_queued = false;
        bool starved = false; ///< waiting in starved_ for a free buffer
    };
    struct fd_ref {
        int fd;
        std::uint32_t generation;
    };

    explicit driver(const driver_options& options);
    int init(const features& allowed, std::string& error);
    void log_features() const;

    fd_state* state(int fd) noexcept;
    io_uring_sqe* get_sqe() noexcept;
    std::uint32_t start_op(op_kind kind, int fd, void* owner, fd_state* st) noexcept;
    void abort_op(std::uint32_t index, fd_state* st) noexcept;
    void set_data(io_uring_sqe* sqe, std::uint32_t index) noexcept;

    int arm_accept(int fd, fd_state& st) noexcept;
    int arm_recv(int fd, fd_state& st) noexcept;
    void arm_hup(int fd, fd_state& st) noexcept;
    void arm_wake() noexcept;
    void cancel_op(std::uint32_t target, fd_state& st) noexcept;
    void cancel_all(int fd, fd_state& st) noexcept;
    void queue_rearm(int fd, fd_state& st) noexcept;
    void queue_starved(int fd, fd_state& st) noexcept;
    void run_rearms(std::vector<completion>& out) noexcept;

    int enter(std::chrono::nanoseconds timeout) noexcept;
    /// More of the completions the kernel left queued, up to a batch per wait (DEFER_TASKRUN).
    void run_queued(std::size_t before, std::vector<completion>& out) noexcept;
    void reap(std::vector<completion>& out) noexcept;
    void on_cqe(const io_uring_cqe& cqe, std::vector<completion>& out) noexcept;
    void on_accept(const op_record& r, const io_uring_cqe& cqe, bool final, fd_state& st,
                   std::vector<completion>& out) noexcept;
    void accept_backlog(const op_record& r, std::vector<completion>& out, int limit) noexcept;
    void on_recv(const op_record& r, const io_uring_cqe& cqe, bool final, fd_state& st,
                 std::vector<completion>& out) noexcept;
    void on_recv_poll(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                      std::vector<completion>& out) noexcept;
    void on_hup(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                std::vector<completion>& out) noexcept;
    void on_connect(const op_record& r, const io_uring_cqe& cqe, fd_state& st,
                    std::vector<completion>& out) noexcept;
    void receiving_ended(int fd, fd_state& st, void* owner, std::vector<completion>& out) noexcept;
    void finish_close(int fd, fd_state& st, std::vector<completion>& out) noexcept;
    void note_starved() noexcept;

    io_uring ring_{};
    bool ring_ready_ = false;
    int wakefd_ = -1;
    features feat_;
    buffer_pool bufs_;
    op_slab ops_;
    std::deque<fd_state> fds_;        // a deque: growing it never moves the states handlers hold
    std::vector<completion> pending_; // produced by verbs, reported by the next wait()
    std::vector<fd_ref> rearm_;
    std::vector<fd_ref> rearm_now_;
    std::vector<fd_ref> starved_; // FIFO from starved_head_
    std::size_t starved_head_ = 0;
    std::uint32_t wake_op_ = no_op;
    const logger* log_;
    unsigned loop_index_;
    driver_options options_;
    bool dry_ = false; // the buffers ran out, and receives still wait for one
    bool enter_error_logged_ = false;
    std::uint64_t starved_total_ = 0;
    std::uint64_t dry_episodes_ = 0;
};

} // namespace sluice::io::uring
