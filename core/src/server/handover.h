// The hand-over protocol: how a running server gives its listening sockets to the process that
// replaces it (docs/operations.md, "Zero-downtime restart"), as nginx's binary upgrade and
// Envoy's hot restart do. One SOCK_SEQPACKET connection on the Unix socket `handover_socket`:
//
//   new                                   old (listening on handover_socket)
//    |--- connect ------------------------->|  old checks the peer's uid (SO_PEERCRED)
//    |<-- "SLUICE-HANDOVER/1 LLA" + fds -----|  one message; the fds ride in SCM_RIGHTS
//    |    (new validates, starts accepting   |  both processes now accept from the same
//    |     on them)                          |  kernel queues: nothing is closed, nothing lost
//    |--- "OK" ----------------------------->|  old: readiness false, its copies of the fds
//    |                                       |  closed (the sockets live on in new), drain, exit
//
// Every wait has a deadline; a new process that closes without "OK" leaves the old one serving.
// SEQPACKET keeps message boundaries: one recvmsg is one whole message, and end of stream is
// a read of 0, so a peer that sends half a message cannot be mistaken for one that sent all.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace sluice::detail {

/// Which listener an fd is: a letter on the wire. 'T' (tls.listen) came after 'L' and 'A': a
/// process that predates it refuses a message with one (its start fails naming handover_socket
/// and the old server keeps serving); it never takes a TLS socket for a plaintext one.
enum class listener_role : char { main = 'L', admin = 'A', tls = 'T' };

struct handed_fd {
    listener_role role = listener_role::main;
    int fd = -1;
};

/// The most descriptors one SCM_RIGHTS message carries (SCM_MAX_FD in the kernel).
inline constexpr std::size_t max_handed_fds = 253;

using handover_deadline = std::chrono::steady_clock::time_point;

/// Old side: sends the listeners in one message. 0, or -errno (-E2BIG past max_handed_fds).
int send_listeners(int sock, std::span<const handed_fd> fds) noexcept;

struct received_listeners {
    std::vector<handed_fd> fds; ///< owned by the caller
    std::string error;          ///< "" when fds are valid
    bool peer_left = false;     ///< the old process closed before sending anything
};

/// New side: waits until `deadline` for the message. On error, no descriptor stays open.
received_listeners receive_listeners(int sock, handover_deadline deadline);

/// New side: the listeners serve here now; the old process may stop. 0, or -errno.
int send_ack(int sock) noexcept;

enum class ack_result { acknowledged, closed, garbage, timed_out, interrupted };

/// Old side: waits for "OK" until `deadline`, or until `wake_fd` (an eventfd, may be -1)
/// becomes readable.
ack_result wait_ack(int sock, int wake_fd, handover_deadline deadline);

/// Closes every descriptor of `fds`.
void close_all(std::span<const handed_fd> fds) noexcept;

} // namespace sluice::detail
