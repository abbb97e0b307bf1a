// Registration of the io_uring backend (backends/registry.cc lists it first, so "auto"
// prefers it wherever it can run).
#include <sluice/backend.h>

#include "buffer_ring.h"
#include "probe.h"
#include "uring_driver.h"

namespace sluice::io {

namespace {

// Says why io_uring cannot run here, or "". It builds what a driver would (a ring with
// the same flags, a buffer ring of the configured size) so that a sysctl, a seccomp filter
// or a locked-memory limit shows up here, where "auto" can still choose epoll, rather
// than in create() on a loop thread.
std::string probe_uring(const driver_options& options) {
    io_uring ring{};
    uring::features got;
    std::string why;
    // The driver's ring sizes: for a user without CAP_IPC_LOCK the rings count against
    // RLIMIT_MEMLOCK, and a smaller probe ring could pass where the real one fails.
    if (uring::setup_ring(ring, uring::sq_entries, uring::cq_entries, uring::features{}, got, why) < 0) {
        return why;
    }
    why = uring::check_required(ring);
    if (why.empty()) {
        uring::buffer_pool pool;
        std::string what;
        const auto geometry =
            uring::buffer_pool::choose(options.recv_buffer_bytes, options.recv_buffer_count);
        const int rc = pool.init(&ring, uring::buffer_pool::mode::ring, geometry, 0, what);
        // -EINVAL: no buffer rings before 5.19, a fallback rather than a reason to refuse.
        if (rc < 0 && rc != -EINVAL) {
            why = std::move(what);
        }
    }
    io_uring_queue_exit(&ring);
    return why;
}

} // namespace

const backend& uring_backend() noexcept {
    static const backend b{"uring", traits{.connection_per_thread = false}, &probe_uring,
                           &uring::driver::create};
    return b;
}

} // namespace sluice::io
