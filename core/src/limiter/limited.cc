// limited(): a route that runs only while it holds a permit. The permit's life follows the
// exchange, not the handler: it is taken before the handler runs and released by an
// on_complete listener, which the core fires exactly once when the exchange ends, whatever
// the outcome (completed, timed out, failed, client gone, server stopped).
#include <cstdint>
#include <stdexcept>
#include <string>

#include <sluice/exchange.h>
#include <sluice/limiter.h>

#include "exchange/exchange_access.h"
#include "limiter/limiter_core.h"

namespace sluice {

namespace {

struct limited_route {
    std::shared_ptr<detail::limiter_core> core;
    handler inner;
    std::string key; // the attribute that carries this wrapper's waiter across re-dispatches
};

response too_busy(const limiter_options& o, std::string_view why) {
    response r(503);
    // RFC 9110 §10.2.3: how long the client should wait before trying again.
    r.header("Retry-After", std::to_string(o.retry_after.count()));
    r.text("Service Unavailable: " + std::string(why) + "\n");
    return r;
}

// The handler runs again for this request: after the permit was granted to it (the first run of
// the inner handler), or because the inner handler resumed itself.
bool run_again(const limited_route& route, exchange& ex) {
    auto w = ex.attribute<std::shared_ptr<detail::limiter_waiter>>(route.key);
    if (!w || !*w) {
        return false; // resumed by someone outside this wrapper: a new request to it
    }
    switch (route.core->enter(**w)) {
    case detail::limiter_core::redispatch::first:
        // To the inner handler this is the request's first dispatch: it never saw the wait.
        detail::exchange_access::restart_dispatches(ex);
        route.inner(ex);
        return true;
    case detail::limiter_core::redispatch::again:
        route.inner(ex);
        return true;
    case detail::limiter_core::redispatch::none:
        break;
    }
    // Unreachable by the contract (a waiter that timed out or was rejected is completed, not
    // resumed); answer rather than run without a permit.
    ex.response() = too_busy(route.core->options(), "no permit");
    return true;
}

void run_limited(const limited_route& route, exchange& ex) {
    if (ex.is_resumed() && run_again(route, ex)) {
        return;
    }
    detail::limiter_core& core = *route.core;
    auto w = std::make_shared<detail::limiter_waiter>();
    w->core = route.core;
    // The listener is in place before a permit can be held, so the release cannot be missed.
    ex.set_attribute(route.key, w); // also gives a sync exchange the state its listeners live in
    async_context ctx = ex.context();
    ctx.on_complete([core = route.core, w](const async_event&) { core->ended(*w); });
    switch (core.admit(*w)) {
    case detail::limiter_core::admission::granted:
        route.inner(ex);
        return;
    case detail::limiter_core::admission::rejected:
        ex.response() = too_busy(core.options(), "too many requests");
        return;
    case detail::limiter_core::admission::must_wait:
        break;
    }
    // Wait suspended: no thread is held (on the reactor backends), and a permit that frees
    // resumes the exchange on its own loop.
    ctx = ex.start_async(core.options().wait_timeout);
    ctx.on_timeout([core = route.core, w](const async_event& ev) {
        detail::limiter_waiter::wake left;
        if (core->time_out(*w, left)) {
            async_context c = ev.context;
            c.complete(too_busy(core->options(), "timed out waiting for a permit"));
        }
        // Otherwise the permit was granted (its resume is already issued) or the inner
        // handler's own wait timed out: not ours to act on.
    });
    detail::limiter_waiter::wake how{ctx, executor(), nullptr};
    switch (core.enqueue(w, how)) {
    case detail::limiter_core::admission::granted:
        ctx.resume(); // a permit came free meanwhile: runs again as soon as this returns
        return;
    case detail::limiter_core::admission::rejected:
        ctx.complete(too_busy(core.options(), "too many requests"));
        return;
    case detail::limiter_core::admission::must_wait:
        return;
    }
}

} // namespace

handler limited(limiter& lim, handler inner) {
    if (!inner) {
        throw std::invalid_argument("limited: empty handler");
    }
    auto route = std::make_shared<limited_route>();
    route->core = lim.core();
    route->inner = std::move(inner);
    route->key = "sluice.limiter." + std::to_string(reinterpret_cast<std::uintptr_t>(route.get()));
    return [route](exchange& ex) { run_limited(*route, ex); };
}

} // namespace sluice
