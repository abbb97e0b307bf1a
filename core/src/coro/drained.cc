#include <memory>
#include <system_error>
#include <utility>

#include <sluice/drained.h>

namespace sluice {

namespace {

// The await's completion, called with operation_canceled when the drain callback is dropped
// unrun (the exchange left its suspension: the client left, a timeout, a stop). Without it, the
// last completion handle would go with the callback and settle the await as broken_promise
// before the coroutine's runner could cancel it.
struct settle_on_drop {
    explicit settle_on_drop(completion<void> d) noexcept : done(std::move(d)) {}
    settle_on_drop(const settle_on_drop&) = delete;
    settle_on_drop& operator=(const settle_on_drop&) = delete;
    ~settle_on_drop() { done(std::make_error_code(std::errc::operation_canceled)); } // ignored after a call
    completion<void> done;
};

} // namespace

async_op<void> drained(const exchange& ex) {
    return async_op<void>([ctx = ex.context()](completion<void> done) mutable {
        // The connection sends the pending piece before it looks at its output (connection::
        // on_async_drain_wanted).
        auto hold = std::make_shared<settle_on_drop>(done);
        if (!ctx.on_drained([hold] { hold->done(); })) {
            done(std::make_error_code(std::errc::operation_canceled));
        }
    });
}

} // namespace sluice
