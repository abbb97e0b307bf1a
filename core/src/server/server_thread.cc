#include "server/server_thread.h"

namespace sluice::detail {

namespace {
thread_local const server_context* marked_server = nullptr;
} // namespace

const server_context* current_server() noexcept {
    return marked_server;
}

server_thread_mark::server_thread_mark(const server_context* server) noexcept {
    marked_server = server;
}

server_thread_mark::~server_thread_mark() {
    marked_server = nullptr;
}

} // namespace sluice::detail
