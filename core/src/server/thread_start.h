// Starting the threads a server runs on (its loops, its connection threads, its handler pool).
// std::thread throws std::system_error when the process cannot have another thread (the user's
// ulimit -u, or no address space left for a stack under ulimit -v). The caller stops and joins
// the threads it already started, then reports the failure as a startup error that names the
// key asking for the threads: never std::terminate from a vector of joinable threads.
#pragma once

#include <cstddef>
#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <sluice/error.h>

#include "server/server_context.h"

namespace sluice::detail {

/// A new thread running `body`, or std::system_error as std::thread fails (also when `ctx`'s
/// refuse_thread test hook says so).
template <class F>
std::thread start_thread(const server_context* ctx, F&& body) {
    if (ctx != nullptr && ctx->refuse_thread && ctx->refuse_thread()) {
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    }
    return std::thread(std::forward<F>(body));
}

/// Thread `index` (from 0) of the `count` that `key` asks for could not start.
inline startup_error thread_start_failed(std::string key, std::size_t index, std::size_t count,
                                         const std::exception& e) {
    return {std::move(key), "cannot start thread " + std::to_string(index + 1) + " of " +
                                std::to_string(count) + ": " + e.what() +
                                " (the process may be at its thread limit, ulimit -u, or out of address "
                                "space for thread stacks, ulimit -v)"};
}

} // namespace sluice::detail
