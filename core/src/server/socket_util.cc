#include "server/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <sluice/config.h>
#include <sluice/error.h>

namespace sluice::detail {

socket_address resolve_listen_address(std::string_view listen) {
    // One parser validates the text (config.cc); here it only becomes an address.
    const listen_address parsed = parse_listen(listen);
    const std::string host_s = parsed.host;
    const std::string port_s = std::to_string(parsed.port);
    addrinfo hints{};
    hints.ai_family = parsed.ipv6 ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host_s.empty() ? nullptr : host_s.c_str(), port_s.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        throw startup_error("listen", "cannot resolve \"" + host_s + "\": " + gai_strerror(rc));
    }
    socket_address out;
    std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
    out.length = res->ai_addrlen;
    freeaddrinfo(res);
    return out;
}

int open_listener(const socket_address& addr, reuse_port reuse, int backlog) {
    const int fd = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        throw startup_error("listen", std::string("socket: ") + std::system_category().message(errno));
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuse == reuse_port::yes) {
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    }
    if (::bind(fd, addr.get(), addr.length) != 0 || ::listen(fd, backlog) != 0) {
        const int err = errno;
        ::close(fd);
        throw startup_error("listen", "cannot listen on " + format_address(addr.get(), addr.length) + ": " +
                                          std::system_category().message(err));
    }
    return fd;
}

std::uint16_t bound_port(int fd) {
    socket_address a;
    a.length = sizeof a.storage;
    if (::getsockname(fd, a.get(), &a.length) != 0) {
        return 0;
    }
    if (a.storage.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
    }
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
}

std::string format_address(const sockaddr* addr, socklen_t len) {
    char host[INET6_ADDRSTRLEN] = {};
    if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(addr);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string at -O3.
        std::string out = "[";
        out += host;
        out += "]:";
        out += std::to_string(ntohs(a->sin6_port));
        return out;
    }
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        std::string out = host;
        out += ':';
        out += std::to_string(ntohs(a->sin_port));
        return out;
    }
    return "";
}

std::string peer_address(int fd) {
    socket_address a;
    a.length = sizeof a.storage;
    if (::getpeername(fd, a.get(), &a.length) != 0) {
        return "";
    }
    return format_address(a.get(), a.length);
}

} // namespace sluice::detail
