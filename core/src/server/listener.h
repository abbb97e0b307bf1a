// Accepts connections on one listening socket for one loop, and hands each new
// socket to a sink (a connection on this loop, or the blocking runtime's queue).
#pragma once

#include <functional>

#include "loop/loop.h"

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
/// or closes it at once when limits.max_connections is reached.
class loop_context;
void adopt_connection(loop_context& lc, int fd) noexcept;

} // namespace sluice::detail
