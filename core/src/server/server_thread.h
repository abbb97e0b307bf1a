// Which server the calling thread works for: each thread a server starts (loops, the
// acceptor, connection threads, pool workers) marks itself for its whole life, so that
// server::stop() can tell "called from one of my threads" without reading thread handles
// that another stop may be joining, and without mistaking a new thread that reuses a dead
// server thread's id for it.
#pragma once

namespace sluice::detail {

struct server_context;

/// The server_context of the server whose thread this is; null on other threads.
const server_context* current_server() noexcept;

/// Marks the calling thread as a thread of `server` while it lives.
class server_thread_mark {
public:
    explicit server_thread_mark(const server_context* server) noexcept;
    ~server_thread_mark();
    server_thread_mark(const server_thread_mark&) = delete;
    server_thread_mark& operator=(const server_thread_mark&) = delete;
};

} // namespace sluice::detail
