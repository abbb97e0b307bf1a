// Accepts connections on one listening socket for one loop, and hands each new
// socket to a sink (a connection on this loop, or the blocking runtime's queue).
#pragma once

#include <functional>

#include "loop/loop.h"
#include "server/listen_plan.h"

namespace sluice::detail {

class listener final : public io_handler {
public:
    using sink = std::function<void(int fd)>;

    listener(detail::loop& l, int fd, sink s);
    ~listener();
    listener(const listener&) = delete;
    listener& operator=(const listener&) = delete;

    /// Arms accepting; false (with errno-style code logged) if the driver refused.
    bool start();
    /// Stops accepting and closes the socket; the loop is released once the driver confirms.
    void close() noexcept;
    bool closed() const noexcept { return closed_; }

    void on_io(const io::completion& c) noexcept override;

private:
    static void on_retry(timer& t) noexcept;

    detail::loop& loop_;
    int fd_;
    sink sink_;
    timer retry_;
    bool closing_ = false;
    bool closed_ = false;
};

/// Sets per-connection socket options and wraps the socket in a connection on lc's loop,
/// or closes it at once when limits.max_connections is reached. `kind` is what the listener
/// that accepted fd speaks: a TLS one's connections go through the loop's TLS driver, a
/// plaintext one's straight to the backend's (docs/tls.md, "Plaintext and TLS in one server").
class loop_context;
void adopt_connection(loop_context& lc, int fd, listener_kind kind) noexcept;

} // namespace sluice::detail
