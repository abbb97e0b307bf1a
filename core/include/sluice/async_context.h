// The handle to a suspended exchange (Servlet 3's AsyncContext, made safe).
//
// Contract (docs/lifecycle.md has the state diagram and the numbered rules):
// - Every member is callable from any thread, at any time, also after the exchange
//   ended and after the server stopped; once the exchange has reached its one
//   terminal transition (a complete() that won is one, before its response is out),
//   every call is a no-op that returns false — but on_complete, which still runs.
// - complete(), complete(response), resume() and the timeout race through one atomic
//   step: exactly one wins. A call made while the suspending handler is still
//   running takes effect when the handler returns, never concurrently with it.
// - complete(response) hands a whole response over; complete() sends what the
//   handler left in exchange::response(). resume() runs the handler again
//   (is_resumed() == true), where it may touch the response.
// - A complete() or resume() that returned true decides the outcome: a handler that
//   throws after it (or after another thread's accepted call) has its exception
//   logged, and nothing else changes — no on_error, no 500.
// - Listeners run on the exchange's I/O loop thread. on_timeout listeners run first
//   when the timeout fires and may complete or resume; if none does, the exchange
//   ends with the timeout status (503 unless set_timeout_status chose another).
//   set_timeout() while they run (Servlet's setTimeout in onTimeout) re-arms instead:
//   unless a listener completes or resumes, the exchange stays suspended with the
//   new timeout (0: none), and the listeners run again when it fires.
//   on_error runs when the client disconnects, a write fails or the server stops.
//   on_complete runs exactly once, last, whatever the outcome.
// - on_drained(fn) is the backpressure of a streamed response: fn runs once, on the loop,
//   when the connection's queued output (what response::write() queued and the kernel has
//   not taken yet) is at or below output_low_water and the exchange is suspended. It waits
//   for the current suspension only: if the exchange leaves it otherwise (complete, resume,
//   timeout, error, stop), fn is dropped unrun, so it never runs after the terminal
//   transition. A client that leaves meanwhile ends the exchange with on_error as usual.
//   Registered while suspended, it first sends what response::write() added since the
//   suspension began (a coroutine writes on the loop while its exchange stays suspended:
//   sluice::drained).
// - A handle holds a reference to a small control block, never to the exchange, so a
//   stale handle cannot touch a recycled exchange.
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/duration.h>
#include <sluice/response.h>

namespace sluice {

namespace detail {
class async_state;
}

class async_context;

/// on_drained() fires when a connection's queued output is at or below this many bytes. A
/// handler that writes at most one chunk per drain keeps at most this plus one chunk queued.
inline constexpr std::size_t output_low_water = std::size_t{64} * 1024;

enum class async_event_kind { timeout, error, complete };

struct async_event;
using async_listener = std::function<void(const async_event&)>;

class async_context {
public:
    async_context() noexcept = default;
    async_context(const async_context& other) noexcept;
    async_context(async_context&& other) noexcept;
    async_context& operator=(const async_context& other) noexcept;
    async_context& operator=(async_context&& other) noexcept;
    ~async_context();

    /// Ends the exchange with the response the handler left in exchange::response().
    bool complete() noexcept;
    /// Ends the exchange with this response.
    bool complete(response r) noexcept;
    /// Runs the handler again on the exchange (is_resumed() == true there).
    bool resume() noexcept;
    /// Restarts the timeout clock with a new duration; 0 means no timeout. From an on_timeout
    /// listener it extends the exchange (see above). False once the exchange ended, and after a
    /// winning resume() (also one deferred while the handler runs) until the resumed dispatch
    /// calls start_async() again, which sets the timeout of that suspension: nothing would use
    /// the value.
    bool set_timeout(std::chrono::milliseconds timeout) noexcept;
    /// Any duration, rounded up to whole milliseconds; one too long for them (hours::max())
    /// saturates to milliseconds::max(), "never", instead of wrapping (duration.h). A negative
    /// one, however small, is refused (false).
    template <class Rep, class Period>
    bool set_timeout(std::chrono::duration<Rep, Period> timeout) noexcept {
        return set_timeout(detail::timeout_ceil_ms(timeout));
    }
    /// The status sent when the timeout ends the exchange: 503 by default, any 5xx allowed.
    bool set_timeout_status(int status) noexcept;

    bool on_timeout(async_listener l);
    bool on_error(async_listener l);
    bool on_complete(async_listener l);
    /// Runs fn once the connection's queued output has drained to output_low_water (see
    /// above). One at a time: a second call replaces a pending fn. False if the exchange is done.
    /// The usual use: write a chunk, start_async(), on_drained([ctx] { ctx.resume(); }).
    bool on_drained(std::function<void()> fn);

    /// Attributes: a thread-safe map, the channel for resume-style results. When the exchange
    /// is released (after on_complete), its attributes and listeners are destroyed, so a value
    /// that holds this context does not keep the state alive; a later set_attribute is dropped.
    void set_attribute(std::string name, std::any value);
    std::any attribute_any(std::string_view name) const;
    template <class T>
    std::optional<T> attribute(std::string_view name) const {
        std::any a = attribute_any(name);
        if (const T* p = std::any_cast<T>(&a)) {
            return *p;
        }
        return std::nullopt;
    }

    /// The exchange has reached its terminal transition (or the handle is empty).
    bool is_done() const noexcept;
    explicit operator bool() const noexcept { return state_ != nullptr; }

    /// For the core: adopt a reference already counted.
    explicit async_context(detail::async_state* adopted) noexcept : state_(adopted) {}
    detail::async_state* state() const noexcept { return state_; }

private:
    detail::async_state* state_ = nullptr;
};

struct async_event {
    async_event_kind kind;
    /// timeout: exchange_errc::timed_out; error: why; complete: empty when completed normally.
    std::error_code error;
    async_context context;
};

} // namespace sluice
