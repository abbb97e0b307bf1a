// Start-up probing for the io_uring backend: create a ring with the best flags this
// kernel takes, say in plain words why io_uring cannot run when it cannot, and find out
// which optional features work, one by one, so that each missing one costs only its own
// fallback (Seastar probes the same way before choosing a reactor backend).
//
// The optional features and the kernel that brought each (io_uring(7), liburing's man
// pages, the kernel's io_uring/ history):
//
//   feature               kernel  used for                      fallback
//   --------------------  ------  ---------------------------   ------------------------------
//   SINGLE_ISSUER +       6.1     completions run only when     COOP_TASKRUN (5.19), then none
//     DEFER_TASKRUN               the loop asks (no IPIs)
//   buffer ring           5.19    receive into kernel-picked    poll for readiness, then recv()
//     (PBUF_RING)                 buffers: no buffer per idle   into a buffer of the driver's
//                                 connection                    pool (what epoll does)
//   multishot recv        6.0     one SQE per connection        one recv SQE per completion
//   multishot accept      5.19    one SQE per listener          one accept SQE per connection
//   multishot poll        5.13    the wake-up eventfd           one poll SQE per wake-up
//   cancel by fd, ALL     5.19    close(): one cancel SQE       one cancel SQE per pending op
//   MSG_RING              5.18    logged only: wake() is called from threads that own no
//                                 ring, so the wake-up is an eventfd
//
// Required, or io_uring is reported unusable: FAST_POLL (5.7; without it every idle
// socket would park a kernel worker thread) and the opcodes RECV, SEND, SENDMSG, ACCEPT,
// POLL_ADD and ASYNC_CANCEL.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <string>

namespace sluice::io::uring {

/// What a ring can do. Also used as an allow-list: a feature is used only when both the
/// kernel has it and the caller allows it (tests force each fallback this way).
struct features {
    bool single_issuer = true; ///< IORING_SETUP_SINGLE_ISSUER + DEFER_TASKRUN (6.1)
    bool coop_taskrun = true;  ///< IORING_SETUP_COOP_TASKRUN (5.19)
    bool buffer_ring = true;
    bool multishot_recv = true;
    bool multishot_accept = true;
    bool multishot_poll = true;
    bool cancel_fd_all = true;
    bool msg_ring = true;
};

/// Ring sizes: the submission queue holds one loop iteration's sends and re-arms (more are
/// submitted early, in batches of this size); the completion queue is larger because one
/// SQE (multishot accept or recv) can post many CQEs before the loop reaps them. A CQ that
/// overflows still loses nothing (IORING_FEAT_NODROP, 5.5) but ends multishot operations,
/// which the driver then re-arms.
inline constexpr unsigned sq_entries = 2048;
inline constexpr unsigned cq_entries = 16384;

/// Creates `ring` with the first flag set this kernel accepts, from the wanted ones down
/// (SINGLE_ISSUER|DEFER_TASKRUN, then COOP_TASKRUN, then none: -EINVAL means "unknown
/// flag" and moves on). Returns 0, or -errno with `error` saying why in plain words.
int setup_ring(io_uring& ring, unsigned sq, unsigned cq, const features& allowed, features& got,
               std::string& error);

/// Checks what every driver needs: FAST_POLL and the required opcodes. "" when all present.
std::string check_required(io_uring& ring);

/// Probes the optional features on a live ring (the driver's own, on its own thread, so
/// that SINGLE_ISSUER holds): multishot accept and cancel-by-fd on an abstract AF_UNIX
/// listener, a buffer ring and multishot recv and poll on a socketpair. The ring must have
/// nothing in flight; everything the probe starts is finished when it returns.
void probe_optional(io_uring& ring, const features& allowed, features& got);

/// Why io_uring_setup or a registration failed with -err, naming the cause a user can
/// fix: the sysctl kernel.io_uring_disabled, a seccomp filter, RLIMIT_MEMLOCK, the kernel.
std::string explain_setup_error(int err, const char* what);

/// "6.18.44-fc-v857" (uname -r), for the log and the error messages.
std::string kernel_release();

/// "SINGLE_ISSUER+DEFER_TASKRUN, multishot accept, ..." for the start-up log line.
std::string describe(const features& f);

} // namespace sluice::io::uring
