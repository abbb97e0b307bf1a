// The coroutine form of a streamed client call: the head, then the body piece by piece, with
// backpressure (docs/client.md, "Streaming").
//
//   sluice::client_request req{.target = "/bytes?n=100000000"};
//   sluice::result<sluice::client_body_stream> s = co_await api.stream(ex.executor(), std::move(req));
//   if (!s) {
//       co_return;                               // as async_send: a client_errc, or operation_canceled
//   }
//   use(s->head().status, s->head().headers);
//   while (auto piece = co_await s->next()) {   // a piece of the body, copied out of the read
//       ex.response().write(*piece);
//       if (co_await sluice::drained(ex)) {
//           co_return;                           // the exchange ended: destroying s cancels the call
//       }
//   }
//   if (s->error()) { ... }                      // the body was cut: reset, response_timed_out, ...
//
// It is client::send_streaming underneath (one client implementation); what it adds:
// - Backpressure: pieces that arrive while the coroutine has not asked for the next one are
//   held, and the upstream read is paused at once; the next() that finds nothing held resumes
//   it. So the stream holds at most one socket read (on io_uring a multishot batch of reads)
//   beyond the piece the coroutine has. A piece is at most max_piece bytes (a batch is handed
//   out in several), so a coroutine that writes each piece and then awaits drained() keeps the
//   server's queued output under output_low_water + max_piece.
// - The end: next() gives a falsy piece once; error() then says how the body ended: empty for
//   a whole body (the connection went back to the pool), else the client_errc that cut it
//   (reset, malformed_response, response_timed_out, cancelled after cancel()), or
//   std::errc::operation_canceled when the exchange ended while next() waited (as drained()).
//   Pieces that arrived before a cut are given out first. Later next() calls give the end again.
// - Cancellation: destroying the stream (or the coroutine frame holding it) before the end
//   cancels the call; its connection is closed, never pooled. When the exchange ends, a pending
//   next() completes at once with operation_canceled and the call is cancelled with it.
// - Threads: the coroutine resumes on its exchange's loop (the async_op contract); the
//   client's callbacks run on the call's loop (the client's own loop on the blocking backend).
//   One next() at a time.
// - GCC 12 destroys a braced temporary inside a co_await expression twice (GCC PR 99576):
//   build the request as a named variable, as above, not `co_await api.stream(on, {...})`.
#pragma once

#include <coroutine>
#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <sluice/async_op.h>
#include <sluice/client.h>
#include <sluice/result.h>
#include <sluice/task.h>

namespace sluice {

namespace detail {
class body_stream_state;

/// What one next() settles with: a piece, or the end and why.
struct body_step {
    std::string bytes;
    bool end = false;
    std::error_code error;
};
} // namespace detail

/// One step of a streamed body (client_body_stream::next): a piece, or the end.
class client_body_piece {
public:
    client_body_piece() = default;
    explicit client_body_piece(std::string bytes) noexcept : bytes_(std::move(bytes)), has_(true) {}
    explicit client_body_piece(std::error_code end_error) noexcept : error_(end_error) {}

    /// A piece of the body (never empty); false at the end.
    explicit operator bool() const noexcept { return has_; }
    std::string& operator*() noexcept { return bytes_; }
    const std::string& operator*() const noexcept { return bytes_; }
    const std::string* operator->() const noexcept { return &bytes_; }
    /// At the end: empty for a whole body, else why it was cut (see the top).
    std::error_code error() const noexcept { return error_; }

private:
    std::string bytes_;
    std::error_code error_;
    bool has_ = false;
};

/// A response whose head has arrived and whose body is read with next(). Move-only.
class client_body_stream {
public:
    /// The largest piece next() gives.
    static constexpr std::size_t max_piece = std::size_t{64} * 1024;

    client_body_stream(client_body_stream&& other) noexcept
        : state_(std::move(other.state_)), head_(std::move(other.head_)), error_(other.error_),
          ended_(other.ended_) {}
    client_body_stream& operator=(client_body_stream&& other) noexcept;
    client_body_stream(const client_body_stream&) = delete;
    client_body_stream& operator=(const client_body_stream&) = delete;
    /// Cancels the call if its body has not ended (see the top).
    ~client_body_stream();

    /// The status and headers (body empty).
    const client_response& head() const noexcept { return head_; }

    class next_awaiter {
    public:
        next_awaiter(client_body_stream& s, async_op<detail::body_step> op) noexcept
            : stream_(&s), op_(std::move(op)) {}
        bool await_ready() const noexcept { return op_.await_ready(); }
        template <detail::sluice_promise Promise>
        bool await_suspend(std::coroutine_handle<Promise> h) {
            return op_.await_suspend(h);
        }
        client_body_piece await_resume() { return stream_->take(op_.await_resume()); }

    private:
        client_body_stream* stream_;
        async_op<detail::body_step> op_;
    };

    /// The next piece of the body, or the end (a falsy piece; error() says how).
    next_awaiter next();
    /// The body has ended (next() gave a falsy piece).
    bool ended() const noexcept { return ended_; }
    /// Once ended(): empty for a whole body, else why it was cut.
    std::error_code error() const noexcept { return error_; }
    /// Cancels the call: a pending or later next() ends with client_errc::cancelled (unless the
    /// body ended first). Thread-safe.
    void cancel() const noexcept;

private:
    friend class detail::body_stream_state;
    client_body_stream(std::shared_ptr<detail::body_stream_state> s, client_response head) noexcept
        : state_(std::move(s)), head_(std::move(head)) {}
    client_body_piece take(result<detail::body_step> r);

    std::shared_ptr<detail::body_stream_state> state_;
    client_response head_;
    std::error_code error_;
    bool ended_ = false;
};

} // namespace sluice
