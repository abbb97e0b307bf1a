// One request and its response, as a handler sees them.
//
// The exchange belongs to its connection's I/O loop. A handler may use it while it
// runs; after start_async(), other threads reach it only through the async_context
// (see async_context.h). Do not keep references to it past the handler's return.
#pragma once

#include <any>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/async_context.h>
#include <sluice/duration.h>
#include <sluice/executor.h>
#include <sluice/request.h>
#include <sluice/response.h>

namespace sluice {

namespace detail {
class exchange_access;
class async_host;
} // namespace detail

class exchange {
public:
    exchange() = default;
    exchange(const exchange&) = delete;
    exchange& operator=(const exchange&) = delete;
    ~exchange();

    const sluice::request& request() const noexcept { return request_; }
    sluice::response& response() noexcept { return response_; }
    /// Moves the request's body out, without a copy: the caller owns it, and request().body()
    /// is empty afterwards. For a body that must outlive the exchange — an upstream call whose
    /// send may still be in flight when the client leaves and the exchange is recycled.
    std::string take_body() noexcept;

    /// Suspends the exchange with the configured default timeout (async_timeout_ms): when the
    /// handler returns, nothing is sent. Calling it again in the same dispatch returns the same
    /// context.
    async_context start_async();
    async_context start_async(std::chrono::milliseconds timeout);
    /// Any duration, rounded up to whole milliseconds; one too long for them saturates to
    /// milliseconds::max(), "never", instead of wrapping (duration.h). A negative one, however
    /// small, is refused (std::invalid_argument).
    template <class Rep, class Period>
    async_context start_async(std::chrono::duration<Rep, Period> timeout) {
        return start_async(detail::timeout_ceil_ms(timeout));
    }

    /// First dispatch of this request.
    bool is_initial() const noexcept { return dispatches_ <= 1; }
    /// Dispatched again by async_context::resume().
    bool is_resumed() const noexcept { return dispatches_ > 1; }
    /// start_async() was called in the current dispatch.
    bool is_async_started() const noexcept { return async_started_; }
    /// The async context of this exchange, empty if start_async() was never called.
    async_context context() const noexcept;

    /// The I/O loop this exchange belongs to: for timers and for callbacks that must run there.
    const sluice::executor& executor() const noexcept { return executor_; }

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

private:
    friend class detail::exchange_access;

    sluice::request request_;
    sluice::response response_;
    sluice::executor executor_;
    detail::async_state* async_ = nullptr; // one reference, created by start_async or set_attribute
    detail::async_host* host_ = nullptr;   // the connection, for the async state's signals
    std::uint64_t generation_ = 0;         // which exchange of the host this is
    std::uint32_t default_timeout_ms_ = 30'000;
    std::uint32_t dispatches_ = 0;
    bool async_started_ = false;
};

} // namespace sluice
