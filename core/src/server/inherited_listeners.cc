#include "server/inherited_listeners.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <sluice/error.h>

namespace sluice::detail {

namespace {

// systemd passes descriptors from 3 on (SD_LISTEN_FDS_START).
constexpr int first_listen_fd = 3;

bool same_host(const socket_address& a, const socket_address& b) {
    if (a.storage.ss_family != b.storage.ss_family) {
        return false;
    }
    if (a.storage.ss_family == AF_INET6) {
        return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr,
                           &reinterpret_cast<const sockaddr_in6*>(&b.storage)->sin6_addr,
                           sizeof(in6_addr)) == 0;
    }
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b.storage)->sin_addr.s_addr;
}

std::uint16_t port_of(const socket_address& a) {
    if (a.storage.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
    }
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
}

bool matches(int fd, const socket_address& want) {
    socket_address got;
    got.length = sizeof got.storage;
    if (::getsockname(fd, got.get(), &got.length) != 0) {
        return false;
    }
    return same_host(got, want) && (port_of(want) == 0 || port_of(got) == port_of(want));
}

const char* find_env(std::span<const char* const> env, std::string_view name) {
    for (const char* e : env) {
        if (e != nullptr) {
            const std::string_view text(e);
            if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=') {
                return e + name.size() + 1;
            }
        }
    }
    return nullptr;
}

} // namespace

std::string check_inherited(int fd, const socket_address& want) {
    int type = 0;
    int listening = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) {
        return "descriptor " + std::to_string(fd) + " is not a socket";
    }
    len = sizeof listening;
    ::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len);
    if (type != SOCK_STREAM || listening == 0) {
        return "descriptor " + std::to_string(fd) + " is not a listening stream socket";
    }
    if (!matches(fd, want)) {
        socket_address got;
        got.length = sizeof got.storage;
        ::getsockname(fd, got.get(), &got.length);
        return "descriptor " + std::to_string(fd) + " listens on " + format_address(got.get(), got.length) +
               ", not on " + format_address(want.get(), want.length);
    }
    // systemd passes blocking descriptors; the backends need non-blocking ones.
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        return "descriptor " + std::to_string(fd) + ": fcntl: " + std::system_category().message(errno);
    }
    return {};
}

std::vector<handed_fd> systemd_listeners(std::span<const char* const> environment, const socket_address& main,
                                         const socket_address* admin, const socket_address* tls) {
    const char* pid_text = find_env(environment, "LISTEN_PID");
    const char* count_text = find_env(environment, "LISTEN_FDS");
    if (pid_text == nullptr || count_text == nullptr) {
        return {};
    }
    // Copies: unsetenv() below may release what the environment pointed to.
    const std::string pid_s(pid_text);
    const std::string count_s(count_text);
    long pid = 0;
    int count = 0;
    if (std::from_chars(pid_s.data(), pid_s.data() + pid_s.size(), pid).ec != std::errc{} ||
        pid != static_cast<long>(::getpid())) {
        return {}; // meant for another process (a parent that did not unset them)
    }
    const std::string names =
        find_env(environment, "LISTEN_FDNAMES") ? find_env(environment, "LISTEN_FDNAMES") : "";
    ::unsetenv("LISTEN_PID");
    ::unsetenv("LISTEN_FDS");
    ::unsetenv("LISTEN_FDNAMES");
    const auto [end, ec] = std::from_chars(count_s.data(), count_s.data() + count_s.size(), count);
    if (ec != std::errc{} || end != count_s.data() + count_s.size() || count < 1 ||
        count > static_cast<int>(max_handed_fds)) {
        throw startup_error("LISTEN_FDS", "must be a count of descriptors from 1 to " +
                                              std::to_string(max_handed_fds) + ", got \"" +
                                              std::string(count_s) + "\"");
    }
    std::vector<std::string_view> name_of;
    for (std::size_t start = 0; start <= names.size() && !names.empty();) {
        const std::size_t colon = std::min(names.find(':', start), names.size());
        name_of.push_back(std::string_view(names).substr(start, colon - start));
        start = colon + 1;
    }
    std::vector<handed_fd> out;
    for (int i = 0; i < count; ++i) {
        const int fd = first_listen_fd + i;
        const std::string_view name =
            static_cast<std::size_t>(i) < name_of.size() ? name_of[static_cast<std::size_t>(i)] : "";
        const bool admin_by_address = admin != nullptr && matches(fd, *admin) && !matches(fd, main);
        const bool tls_by_address = tls != nullptr && matches(fd, *tls) && !matches(fd, main);
        // A role name is the operator's word and wins over the address; any other name (systemd
        // names a descriptor after its socket unit by default) leaves it to the address.
        listener_role role = listener_role::main;
        if (name == "admin" || (name != "tls" && admin_by_address)) {
            role = listener_role::admin;
        } else if (name == "tls" || tls_by_address) {
            role = listener_role::tls;
        }
        out.push_back({role, fd});
    }
    return out;
}

std::vector<int> fds_of(std::span<const handed_fd> fds, listener_role role) {
    std::vector<int> out;
    for (const auto& f : fds) {
        if (f.role == role) {
            out.push_back(f.fd);
        }
    }
    return out;
}

} // namespace sluice::detail
