// The seam between the core and an I/O backend.
//
// A backend is mechanism only: it moves bytes and makes a thread wait. It never
// runs user code, never parses HTTP, never frees a core object. The loop (wait →
// dispatch completions → run the mailbox → expire timers), the timers, the protocol
// engine and the async state machine live in the core, once.
//
// The interface is completion-shaped (Seastar's lesson): the core asks for an
// operation on a file descriptor and names an `owner`; later, wait() reports a
// completion for that owner. A readiness backend (epoll) emulates completions: it
// tries the syscall and waits for readiness on EAGAIN. A completion backend
// (io_uring) submits the operation natively.
//
// Numbered rules every driver keeps (tests/conformance checks them end to end):
//  1. Only wake() is thread-safe; everything else runs on the loop's thread.
//  2. wait() only reports; it runs no core code and frees nothing.
//  3. Results are bytes, a file descriptor, or -errno. Nothing throws.
//  4. After close(fd, owner), completions already produced for owner may still be
//     reported, then exactly one op::close completion; after that, never again
//     anything for that owner. The core frees the owner only on op::close.
//  5. A recv completion with data lends a buffer: the bytes stay valid until the
//     core calls release(buffer). The core releases every buffer before the next
//     wait() (it copies what it must keep), so a driver may size its pool by the
//     number of completions one wait() can report.
//  6. Receiving is armed by recv() and stays armed (multishot) until a completion
//     with more == false: end of stream (0), an error, cancellation by pause_recv(),
//     or a driver-side stop such as an exhausted buffer pool (-ENOBUFS), after which
//     the core re-arms with recv(). While receiving is paused, a peer hang-up is
//     still reported, as a recv completion with result 0 or -errno and more == false,
//     before any bytes still unread ahead of the FIN; recv() after an end of stream gives
//     those bytes, then reports the end again (tests/unit/backends/end_of_stream_test.cc).
//     That report may reach the core after it armed again (in the batch of the pause's final
//     completion), so the core takes an end after a pause as stale (loop/paused_hang_up.h) and
//     calls recv() again, which must be harmless while a receive is still live (a driver may
//     read once more).
//  7. send() produces exactly one op::send completion: bytes sent (possibly fewer
//     than asked, even 0: the core sends the rest and its write deadline decides) or -errno. The iovec array
//     and the memory it points to must stay untouched by the core until then. At most one send per fd is
//     outstanding.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {
class logger;
}

namespace sluice::io {

enum class op : std::uint8_t { accept, recv, send, connect, close };

inline constexpr std::uint32_t no_buffer = ~std::uint32_t{0};

struct completion {
    void* owner = nullptr;
    op kind = op::recv;
    bool more = false;                ///< the operation stays armed
    std::int32_t result = 0;          ///< accept: fd; recv/send: bytes; connect/close: 0; or -errno
    std::uint32_t buffer = no_buffer; ///< recv: the lent buffer, for release()
    const char* data = nullptr;       ///< recv: the bytes received
};

/// What a backend is, declared once; the core chooses its threading from it.
struct traits {
    /// One loop serves one connection on a thread of its own, with blocking calls
    /// (thread-per-connection). The core then runs an acceptor and a bounded pool.
    bool connection_per_thread = false;
};

struct driver_options {
    unsigned loop_index = 0;
    std::uint32_t recv_buffer_bytes = 16 * 1024; ///< size of one receive buffer
    std::uint32_t recv_buffer_count = 256;       ///< buffers in a loop's pool (rule 5)
    std::uint32_t max_fds = 20'000;              ///< sizing hint for per-fd tables
    /// Blocking drivers: the longest one send() blocks (capped at 250 ms) before reporting what
    /// it sent, so the core's write deadline can act; a wake() ends the wait at once.
    std::uint32_t send_timeout_ms = 30'000;
    const logger* log = nullptr; ///< for what the driver probed and chose
};

class driver {
public:
    virtual ~driver() = default;

    /// Starts accepting on a listening socket: op::accept completions (result = new fd,
    /// non-blocking, close-on-exec) with more == true, until close(listen_fd, owner).
    virtual int accept(int listen_fd, void* owner) noexcept = 0;
    /// Arms receiving on fd (rule 6).
    virtual int recv(int fd, void* owner) noexcept = 0;
    /// Stops delivering data (backpressure); a final completion with more == false follows.
    virtual void pause_recv(int fd, void* owner) noexcept = 0;
    /// Sends the bytes of iov (rule 7).
    virtual int send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept = 0;
    /// Ends the sending side (the FIN, after TLS's close_notify) while receiving goes on; called
    /// with no send outstanding on fd. Synchronous, no completion: 0 or -errno.
    virtual int shutdown_send(int fd) noexcept = 0;
    /// Connects a non-blocking socket: one op::connect completion, 0 or -errno.
    virtual int connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept = 0;
    /// Cancels everything on fd and closes it (rule 4).
    virtual void close(int fd, void* owner) noexcept = 0;
    /// Waits up to timeout (negative: forever; zero: poll) and appends completions to out.
    /// Returns the number appended, or -errno. Returns early after wake().
    virtual int wait(std::chrono::nanoseconds timeout, std::vector<completion>& out) noexcept = 0;
    /// Gives a lent receive buffer back (rule 5).
    virtual void release(std::uint32_t buffer) noexcept = 0;
    /// Makes a wait() in progress (or the next one) return. The only thread-safe member.
    virtual void wake() noexcept = 0;
};

/// One registered backend. `probe` says why it cannot run here ("" when it can);
/// `create` builds one driver per loop, or returns null with the reason in `error`.
struct backend {
    std::string_view name;
    io::traits traits;
    std::string (*probe)(const driver_options& options);
    std::unique_ptr<driver> (*create)(const driver_options& options, std::string& error);
};

} // namespace sluice::io

namespace sluice::io {
/// Every backend of this build, in order of preference for "auto" (backends/registry.cc).
std::span<const backend* const> registered_backends() noexcept;
} // namespace sluice::io
