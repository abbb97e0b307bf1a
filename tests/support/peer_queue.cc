#include "support/peer_queue.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>
#include <string>

namespace sluice::test {

namespace {

std::optional<std::uint16_t> port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) {
        return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    }
    if (a.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    }
    return std::nullopt;
}

// "ADDRESS:PORT" with both in hex; the port is the part after the colon.
std::optional<std::uint16_t> port_in(const std::string& field) {
    const auto colon = field.rfind(':');
    if (colon == std::string::npos) {
        return std::nullopt;
    }
    return static_cast<std::uint16_t>(std::stoul(field.substr(colon + 1), nullptr, 16));
}

// Lines: "sl local_address rem_address st tx_queue:rx_queue ...".
std::optional<std::size_t> find(const char* table, std::uint16_t local, std::uint16_t remote) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line); // the heading
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string sl, loc, rem, st, queues;
        if (!(fields >> sl >> loc >> rem >> st >> queues)) {
            continue;
        }
        if (port_in(loc) != local || port_in(rem) != remote) {
            continue;
        }
        const auto colon = queues.find(':');
        if (colon == std::string::npos) {
            continue;
        }
        return static_cast<std::size_t>(std::stoul(queues.substr(colon + 1), nullptr, 16));
    }
    return std::nullopt;
}

} // namespace

std::optional<std::size_t> peer_receive_queue(int fd) {
    sockaddr_storage self{};
    sockaddr_storage peer{};
    socklen_t len = sizeof self;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) {
        return std::nullopt;
    }
    len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
        return std::nullopt;
    }
    const auto ours = port_of(self);
    const auto theirs = port_of(peer);
    if (!ours || !theirs) {
        return std::nullopt;
    }
    // The peer's socket: its local port is our peer's, its remote port ours.
    if (auto q = find("/proc/net/tcp", *theirs, *ours)) {
        return q;
    }
    return find("/proc/net/tcp6", *theirs, *ours);
}

} // namespace sluice::test
