// One accepted HTTP/1.1 connection: drives the sans-I/O session over the backend
// and runs each exchange through its lifecycle (docs/lifecycle.md).
//
//                  request ready                handler returns (sync, or
//   [reading] -----------------------> [dispatching] -- complete pending) --> finish --+
//      ^  ^                                 |                                          |
//      |  |                                 | handler returns after start_async()      |
//      |  |                                 v                                          |
//      |  |                           [suspended] -- complete / timeout / error -------+
//      |  |                                 |                                          |
//      |  |                                 +-- resume --> [dispatching] (again)       |
//      |  +----------------------------------------------------------------------------+
//      |                  (keep-alive: the next pipelined request is parsed at once;
//      |                   responses are queued in order and flushed once per iteration)
//      +-- any state --> [closing] --(driver's op::close)--> freed
//      |                     ^
//      +-- last response out, input unread --> [lingering] (sending side shut, input dropped
//                                               until the client's end or lingering_timeout_ms)
//
// Everything here runs on the connection's loop thread. With dispatch = pool the
// handler runs on a worker while the connection stays in [dispatching]; nothing
// touches the exchange then, and a disconnect seen meanwhile is acted on when the
// handler returns.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/error.h>
#include <sluice/exchange.h>
#include <sluice/tls_info.h>

#include "exchange/async_state.h"
#include "http/server_session.h"
#include "loop/loop.h"
#include "loop/paused_hang_up.h"

namespace sluice::detail {

class loop_context;
struct request_slot;
using buffer = std::unique_ptr<std::string>;

class connection final : public io_handler, public async_host, public deferred {
public:
    connection(loop_context& lc, int fd, std::string_view peer);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// Arms receiving and the first deadline.
    void start();
    /// Server stop begins (the drain): an idle connection closes; a request in progress may
    /// finish, and its response closes the connection.
    void shutdown() noexcept;
    /// The drain's time is up: a suspended exchange ends with on_error(shutting_down) and 503,
    /// a request still being received is dropped.
    void end_for_shutdown() noexcept;
    /// Last resort after the drain: close whatever is left (a response the client won't read),
    /// except a handler a worker still runs, which the stop waits for: its response goes out
    /// when it returns, until the next of these sweeps (one a second while any is left).
    void close_for_shutdown() noexcept;

    void on_io(const io::completion& c) noexcept override;
    void on_async_signal(std::uint64_t generation) noexcept override;
    void on_async_timeout_changed(std::uint64_t generation) noexcept override;
    void on_async_drain_wanted(std::uint64_t generation) noexcept override;
    void run_deferred() noexcept override;

    std::uint32_t slot = 0; ///< index in loop_context::connections()

    /// Memory held for received input (the buffer's capacity), for tests and statistics.
    std::size_t input_bytes_held() const noexcept { return in_ ? in_->capacity() : 0; }
    /// Response bytes queued and not yet taken by the kernel.
    std::size_t output_queued() const noexcept {
        return (out_ ? out_->size() - out_off_ : 0) + (out_next_ ? out_next_->size() : 0);
    }

private:
    enum class state : std::uint8_t { reading, dispatching, suspended, lingering, closing };
    enum class deadline_kind : std::uint8_t { none, first_request, idle, head, body, write, linger };

    exchange& ex() noexcept;
    http::phase phase() const noexcept;

    // Input.
    void on_recv(const io::completion& c) noexcept;
    bool arm_recv() noexcept; // recv() on the driver; false: it refused (recv_armed_ stays false)
    void process_input() noexcept;
    std::size_t parse_from(std::string_view data) noexcept;
    void compact_input() noexcept;
    void acquire_slot() noexcept;
    void on_request_ready() noexcept;
    void end_of_input() noexcept;          // the client's end of stream
    void close_at_end_of_input() noexcept; // once what it sent is answered
    void peer_gone(exchange_errc why) noexcept;

    // Exchanges.
    void dispatch() noexcept;
    void run_handler() noexcept;
    bool after_handler() noexcept; // true: dispatch again (resume)
    void on_worker_returned() noexcept;
    void suspend() noexcept;
    void leave_suspended() noexcept;
    void handle_signal() noexcept;
    void adopt_handed(response&& handed) noexcept; // what complete(r) handed over
    void check_drained() noexcept;                 // runs on_drained() if the output allows
    void finish_exchange(std::error_code outcome) noexcept;
    /// What an aborted exchange does with the answers queued before it: dropped with the
    /// connection (it failed), or sent first (the client ended its stream but may read).
    enum class queued_output : std::uint8_t { discard, flush };
    void abort_exchange(exchange_errc why, queued_output output = queued_output::discard) noexcept;
    void release_exchange(std::error_code outcome) noexcept;
    void fire(async_event_kind kind, std::error_code error) noexcept;
    bool decide_keep_alive() noexcept;
    bool has_pipelined_input() const noexcept;
    void queue_error(int status, std::string_view reason) noexcept;
    void queue_stream_part() noexcept;
    /// queue_stream_part() for a suspended exchange; true when the part overflowed a declared
    /// Content-Length and the exchange has failed (finished) because of it.
    bool queue_suspended_stream_part() noexcept;
    void queue_counted_part(std::string_view part, const http::response_framing& f, std::string& out);
    bool stream_length_broken() noexcept;
    void refuse_interim_status() noexcept;
    http::response_framing stream_framing() noexcept;
    std::string& output() noexcept;

    // Output.
    void schedule_flush() noexcept;
    void start_send() noexcept;
    bool send_rest() noexcept; // sends out_ from out_off_; false: failed (write_failed ran)
    std::chrono::milliseconds send_allowance(std::size_t bytes) const noexcept;
    void renew_write_deadline() noexcept;
    void on_sent(const io::completion& c) noexcept;
    void write_failed() noexcept;
    bool output_idle() const noexcept { return !sending_ && (!out_next_ || out_next_->empty()); }

    // Deadlines: one timer for the I/O deadline and the async timeout, armed at the earlier of
    // the two and moved lazily (re-armed only when a deadline comes earlier).
    void refresh_deadline() noexcept;
    void set_deadline(deadline_kind kind) noexcept;
    void arm_timer() noexcept;
    void on_timer() noexcept;
    void on_deadline() noexcept;
    static void on_timer_fired(timer& t) noexcept;
    void on_async_timeout() noexcept;
    void rearm_async_timeout() noexcept;

    void close_or_linger() noexcept; // the last response is out
    void on_linger_recv(const io::completion& c) noexcept;
    /// Bytes of ours not yet acknowledged by the client (the kernel's or TLS's own queue).
    bool response_in_flight() const noexcept;
    /// Arms the next look at response_in_flight() of a TLS linger (linger_for_records_).
    void poll_linger() noexcept;
    static constexpr std::chrono::milliseconds linger_poll{20};
    void close_now() noexcept;
    void on_closed() noexcept;
    void trim_buffers() noexcept;

    loop_context& lc_;
    std::unique_ptr<request_slot> work_; // the request in progress: parser, exchange, handler
    buffer in_;                          // received, not parsed yet (pipelined or awaiting a busy exchange)
    buffer out_;                         // being sent (frozen while sending_)
    buffer out_next_;                    // queued behind out_
    std::size_t in_off_ = 0;             // parsed prefix of in_ (dropped before more is appended)
    std::size_t out_off_ = 0;            // sent prefix of out_ (size_t: a response may pass 4 GiB)
    std::size_t parse_rest_ = 0;         // while a request parsed from a buffer runs: bytes after it
    iovec iov_{};
    timer timer_;
    clock::time_point io_deadline_{};
    clock::time_point async_deadline_{};
    clock::time_point write_cap_{}; // while sending: by when all queued output must be out
    std::string peer_;
    std::shared_ptr<const tls_info> tls_; // the decorator's description, fetched with the first request
    std::uint64_t generation_ = 0;
    std::uint32_t served_ = 0;
    int fd_;
    state state_ = state::reading;
    deadline_kind deadline_kind_ = deadline_kind::none;
    exchange_errc pending_error_{}; // seen while a pool worker ran the handler; {} = none
    bool sending_ = false;
    bool recv_armed_ = false;
    bool recv_paused_ = false;
    bool peer_closed_ = false; // no more input: an end of stream or a failed socket
    paused_hang_up hang_up_;   // which end-of-stream report to believe after a pause
    bool eof_unread_ = false;  // the end of stream came while paused: bytes ahead of it are unread
    bool close_after_flush_ = false;
    bool linger_wanted_ = false;      // an error ended the request: the rest of it may still come
    bool cut_by_reset_ = false;       // a close-delimited stream was cut: the close must not look clean
    bool linger_for_records_ = false; // TLS: lingering only while the response is on its way
    clock::time_point linger_end_{};  // linger_for_records_: lingering_timeout_ms from its start
    bool in_process_input_ = false;
    bool shutting_down_ = false;
    bool drain_expired_ = false;
    bool stream_keep_alive_ = true;  // a streaming response fixed its framing when its head went out
    bool stream_no_content_ = false; // ... and whether it carries a body at all (204, 304)
    bool stream_overflow_ = false;   // ... and whether the handler wrote past its declared length
    std::optional<std::uint64_t> stream_length_; // ... the length it declared (Content-Length)
    std::uint64_t stream_sent_ = 0;              // ... and how much of that was queued
    bool handler_threw_ = false;                 // written by the handler's thread, read after it returned
};

} // namespace sluice::detail
