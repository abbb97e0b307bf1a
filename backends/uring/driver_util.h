// Helpers shared by the driver's translation units (uring_driver.cc: creation, verbs and
// wait; uring_submit.cc: arming and cancelling; uring_complete.cc: reaping CQEs).
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include <sluice/backend.h>
#include <sluice/log.h>

namespace sluice::io::uring::detail {

// The buffer group of the driver's receive ring (one ring per io_uring, so any id will do).
inline constexpr std::uint16_t recv_bgid = 0;
// A send larger than this is cut: the SQE's length is 32 bits, and the core handles short
// sends (rule 7).
inline constexpr std::size_t max_send_bytes = std::size_t{1} << 30;
// Connections taken from a listener's backlog per one-shot accept completion (fallback only).
inline constexpr int accept_batch = 64;
// Connections taken from a closing listener's backlog when its accept has ended: the listen
// backlog the core asks for, so one pass empties a full queue.
inline constexpr int close_drain_limit = 4096;

template <class... Args>
void log_to(const logger* log, log_level level, fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (log == nullptr || !log->enabled(level)) {
        return;
    }
    try {
        log->log(level, f, std::forward<Args>(args)...);
    } catch (...) {
        // Logging is best effort on completion paths.
    }
}

/// Appends without throwing: wait() reserves room for what a reap can produce, so only a
/// verb's pending_ can fail here, and then the completion is lost with the memory.
inline void emit(std::vector<completion>& out, const completion& c) noexcept {
    try {
        out.push_back(c);
    } catch (const std::bad_alloc&) {
    }
}

inline int socket_error(int fd) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        return errno;
    }
    return err;
}

} // namespace sluice::io::uring::detail
