// Coroutine handlers: a handler may be a coroutine returning sluice::task<>.
//
//   srv.get("/work", [](sluice::exchange& ex) -> sluice::task<> {
//       if (auto ec = co_await sluice::sleep_for(ex, std::chrono::seconds(3))) {
//           co_return;            // cancelled: the client left or the async timeout fired
//       }
//       ex.response().text("done\n");
//   });                           // the exchange completes with what the coroutine wrote
//
// server::route/get/post recognise such a function; elsewhere (router::add, a handler
// variable) wrap it with sluice::coroutine_handler(f).
//
// How it runs (docs/api.md, "Coroutine handlers", has the whole contract):
// - The handler suspends the exchange (start_async() with the configured async timeout) and
//   runs the coroutine up to its first suspension on the dispatching thread (the loop, or a
//   worker with dispatch = pool). Every later segment runs on the exchange's loop thread.
// - When the coroutine returns, the exchange completes with ex.response() as the coroutine
//   left it (complete()). An exception that escapes it ends the exchange like a throwing
//   handler: 500 (logged), or a cut stream when the response head went out.
// - When the exchange ends first (client gone, async timeout → 503, server stop), the pending
//   await completes with std::errc::operation_canceled and the coroutine runs to its end on
//   the loop thread, inside that event; each later await fails the same way at once. What it
//   writes then is dropped, also on a stream whose head went out. A timeout ends the exchange
//   only if no on_timeout listener completed, resumed or re-armed it (set_timeout): a re-arm
//   keeps the coroutine waiting, and it finishes the exchange.
// - The frame is destroyed when the coroutine ends, and at the latest in the exchange's
//   on_complete: no frame outlives its exchange.
// - Do not call resume() on a coroutine exchange's context: the coroutine owns it.
// - To stream: response().write(piece), then co_await sluice::drained(ex) (drained.h).
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include <sluice/async_context.h>
#include <sluice/async_op.h>
#include <sluice/exchange.h>
#include <sluice/handler.h>
#include <sluice/result.h>
#include <sluice/sleep.h>
#include <sluice/task.h>

namespace sluice {

/// A function that makes the coroutine of a handler. Called like any handler: on many threads
/// at once with dispatch = pool, so it should not change its own captures.
template <class F>
concept coroutine_function =
    std::invocable<F&, exchange&> && std::same_as<std::invoke_result_t<F&, exchange&>, task<>>;

namespace detail {
/// On the dispatching thread: runs the handler's coroutine until it first suspends, under the
/// exchange's async context. Rethrows what the coroutine throws before it first suspends.
void launch_coroutine(exchange& ex, async_context ctx, task<> t);
/// A resumed dispatch of a coroutine handler: rethrows the exception the coroutine ended
/// with (the connection then answers 500), or suspends the exchange again.
void redispatch_coroutine(exchange& ex);
} // namespace detail

/// The handler that runs f's coroutine for each request.
template <coroutine_function F>
handler coroutine_handler(F f) {
    return [f = std::move(f)](exchange& ex) mutable {
        if (ex.is_resumed()) {
            detail::redispatch_coroutine(ex);
            return;
        }
        async_context ctx = ex.start_async();
        detail::launch_coroutine(ex, std::move(ctx), f(ex));
    };
}

} // namespace sluice
