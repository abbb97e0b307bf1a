// Listening sockets and addresses: plain POSIX, the same for every backend (the
// backends only accept on what the core bound).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::detail {

struct socket_address {
    sockaddr_storage storage{};
    socklen_t length = 0;
    const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
    sockaddr* get() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
};

/// Resolves a "host:port", "[v6]:port" or ":port" listen address. Throws startup_error("listen").
socket_address resolve_listen_address(std::string_view listen);

enum class reuse_port { no, yes };

/// A non-blocking listening socket bound to addr. Throws startup_error("listen") with the reason
/// (address in use, permission denied, ...).
int open_listener(const socket_address& addr, reuse_port reuse, int backlog);

/// The port a socket is bound to.
std::uint16_t bound_port(int fd);

/// "ip:port" ("[v6]:port") of a socket address.
std::string format_address(const sockaddr* addr, socklen_t len);

/// The peer of a connected socket, formatted; "" if unknown.
std::string peer_address(int fd);

} // namespace sluice::detail
