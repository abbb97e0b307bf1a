// What waits unread in the other end's receive queue of a loopback TCP connection, from the
// kernel's table (/proc/net/tcp and tcp6: rx_queue, the bytes received and acknowledged that
// its application has not read yet). For the cases that bound what a server took in: bytes a
// client sent are in that queue, not in the server, until the server reads them, and the kernel
// autotunes the queue to megabytes.
#pragma once

#include <cstddef>
#include <optional>

namespace sluice::test {

/// The receive queue of the socket at the other end of `fd` (a connected TCP socket to a peer
/// in this machine), or nullopt if the kernel's table has no such socket.
std::optional<std::size_t> peer_receive_queue(int fd);

} // namespace sluice::test
