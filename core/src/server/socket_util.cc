#include "server/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <sluice/error.h>

namespace sluice::detail {

socket_address resolve_listen_address(std::string_view listen) {
    std::string_view host;
    std::string_view port;
    if (!listen.empty() && listen.front() == '[') {
        const auto close = listen.find(']');
        if (close == std::string_view::npos || close + 1 >= listen.size() || listen[close + 1] != ':') {
            throw startup_error("listen",
                                "expected \"[v6-address]:port\", got \"" + std::string(listen) + "\"");
        }
        host = listen.substr(1, close - 1);
        port = listen.substr(close + 2);
    } else {
        const auto colon = listen.rfind(':');
        if (colon == std::string_view::npos) {
            throw startup_error("listen", "expected \"host:port\", got \"" + std::string(listen) + "\"");
        }
        host = listen.substr(0, colon);
        port = listen.substr(colon + 1);
    }
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
        throw startup_error("listen", "bad port \"" + std::string(port) + "\"");
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string host_s(host);
    const std::string port_s(port);
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
        throw startup_error("listen", std::string("socket: ") + std::strerror(errno));
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
                                          std::strerror(err));
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
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
    if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(addr);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
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
