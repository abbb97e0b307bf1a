// The entry points of coroutine handlers (coro.h): the first dispatch launches the
// coroutine under a runner; a later dispatch rethrows what it ended with.
#include <any>
#include <exception>

#include <sluice/coro.h>

#include "coro/coro_run.h"
#include "exchange/async_state.h"

namespace sluice::detail {

void launch_coroutine(exchange& ex, async_context ctx, task<> t) {
    auto frame = t.release();
    if (!frame) {
        throw std::logic_error("sluice: a coroutine handler returned an empty task");
    }
    // The runner owns the frame from here; one reference belongs to the listeners below.
    async_context listeners_ctx = ctx;
    coro_run* run = nullptr;
    try {
        run = new coro_run(std::move(ctx), ex.executor(), frame, ex.response());
    } catch (...) {
        frame.destroy(); // taken out of the task above, and owned by no runner: it never ran
        throw;
    }
    frame.promise().sluice_bind(run, {});
    // on_complete first: once it is registered, the runner is released however the exchange
    // ends, also if registering the others throws (bad_alloc) and the handler fails.
    try {
        if (!listeners_ctx.on_complete([run](const async_event&) { run->on_complete(); })) {
            throw std::logic_error("sluice: the exchange ended before its coroutine started");
        }
    } catch (...) {
        run->release(); // destroys the frame, which never ran
        throw;
    }
    // The timeout cancels the coroutine only once it has won (no on_timeout listener completed,
    // resumed or extended the exchange): a listener that re-arms keeps the coroutine running,
    // and it finishes the exchange (docs/api.md, "How it ends").
    listeners_ctx.state()->set_expiry_hook([run] { run->end(); });
    listeners_ctx.on_error([run](const async_event&) { run->end(); });

    if (run->launch()) {
        // Finished without suspending: end the exchange from here (deferred until the handler
        // returns, by the async contract).
        if (std::exception_ptr e = run->error()) {
            std::rethrow_exception(e);
        }
        listeners_ctx.complete();
    }
}

void redispatch_coroutine(exchange& ex) {
    const std::any a = ex.attribute_any(coroutine_exception_attribute);
    if (const auto* e = std::any_cast<std::exception_ptr>(&a); e != nullptr && *e) {
        std::rethrow_exception(*e);
    }
    // Someone called resume() on the context: the coroutine still owns the exchange.
    (void)ex.start_async();
}

} // namespace sluice::detail
