// sleep_for: a loop timer as an awaitable, withdrawn when the exchange ends first.
#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include <sluice/sleep.h>

#include "exchange/exchange_access.h"
#include "loop/loop.h"
#include "loop/loop_port.h"

namespace sluice {

namespace {

// One sleep. Everything in it is touched on the timer's loop thread only: the timer is armed,
// fires and is withdrawn there. It holds the completion until the timer fires or the await is
// cancelled, so a cancelled sleep leaves nothing behind, whatever its delay.
struct sleep_state {
    std::optional<completion<void>> done;
    detail::timer* armed = nullptr;
    bool cancelled = false;

    void finish(std::error_code error) noexcept {
        if (done) {
            const completion<void> d = std::move(*done);
            done.reset();
            d(error);
        }
    }
};

} // namespace

async_op<void> sleep_for(const executor& loop, std::chrono::milliseconds delay) {
    delay = std::max(delay, std::chrono::milliseconds(0));
    return async_op<void>([loop, delay](completion<void> done) {
        auto st = std::make_shared<sleep_state>();
        st->done.emplace(done);
        detail::loop_port* port = detail::exchange_access::port(loop).get();
        // The tasks below run on the port's own loop, which holds them: `port` outlives them.
        const bool posted = loop.post([st, port, delay] {
            if (st->cancelled) {
                return;
            }
            try {
                st->armed = port->owner_loop().call_after(delay, [st] {
                    st->armed = nullptr;
                    st->finish({});
                });
            } catch (const std::bad_alloc&) {
                st->finish(std::make_error_code(std::errc::not_enough_memory));
            }
        });
        if (!posted) {
            done(std::make_error_code(std::errc::operation_canceled)); // the loop has stopped
            return;
        }
        // Runs on the exchange's loop, which need not be the timer's: the timer goes on its own.
        done.on_cancel([st, loop, port] {
            (void)loop.post([st, port] {
                st->cancelled = true;
                if (st->armed != nullptr) {
                    port->owner_loop().cancel_call(std::exchange(st->armed, nullptr));
                }
                st->done.reset();
            });
        });
    });
}

} // namespace sluice
