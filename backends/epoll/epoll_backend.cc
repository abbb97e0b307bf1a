// Registration of the epoll backend (backends/registry.cc lists it).
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "epoll_driver.h"

namespace sluice::io {

namespace {

std::string probe_epoll(const driver_options&) {
    const int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) {
        return std::string("epoll_create1 failed: ") + std::system_category().message(errno);
    }
    ::close(fd);
    return "";
}

} // namespace

const backend& epoll_backend() noexcept {
    static const backend b{"epoll", traits{.connection_per_thread = false}, &probe_epoll,
                           &epoll::driver::create};
    return b;
}

} // namespace sluice::io
