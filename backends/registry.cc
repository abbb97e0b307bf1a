// The registry: every backend this build has, in order of preference for "auto".
// Adding a backend is one folder and one line here.
#include <sluice/backend.h>

#include <array>
#include <span>

namespace sluice::io {

const backend& blocking_backend() noexcept;
const backend& epoll_backend() noexcept;
#if SLUICE_HAVE_URING
const backend& uring_backend() noexcept;
#endif

std::span<const backend* const> registered_backends() noexcept {
    static const std::array all{
#if SLUICE_HAVE_URING
        &uring_backend(),
#endif
        &epoll_backend(),
        &blocking_backend(),
    };
    return all;
}

} // namespace sluice::io
