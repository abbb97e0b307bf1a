// One upstream connection of a pool: the client session over a transport.
//
//   start_connect()      on_connected(0)        response complete, reusable
//   [connecting] ------------------> [busy] ---------------------------------> [idle]
//        |                             |  ^                                      |
//        |                             |  +---------- run(next call) ------------+
//        +-- refused / connect timeout +-- error, timeout, cancel, not reusable -+-- EOF, idle timeout,
//        v                             v                                         v   lifetime, stray bytes
//     [closing] <--------------------------------------------------------------------+
//        |  driver's op::close
//        v
//      freed (the loop's live count drops)
//
// A streamed call's body paused when its head arrives (pause_body() before the head or inside
// on_head) is held in [busy]: no byte of it reaches on_body, nothing is read, no timeout runs,
// until resume_body(); then the held bytes go to the session from the timer (never inline).
//
// Everything runs on the pool's loop thread. The connection holds its pool (shared) until
// it is freed, so a pool outlives every connection and every send in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "client/client_call.h"
#include "client/transport.h"
#include "client/upstream.h"
#include "http/client_session.h"
#include "loop/loop.h"

namespace sluice::detail {

class client_pool;

class client_connection final : public transport_user, public http::response_sink {
public:
    client_connection(std::shared_ptr<client_pool> pool, std::shared_ptr<upstream_address> address);
    client_connection(const client_connection&) = delete;
    client_connection& operator=(const client_connection&) = delete;

    /// Connects for `call`, which runs once connected (or fails through the pool).
    void start_connect(std::shared_ptr<client_call_state> call) noexcept;
    /// Serves `call` on this idle connection.
    void run(std::shared_ptr<client_call_state> call, bool from_pool) noexcept;
    /// The call ends now with `why` (cancelled); the connection closes.
    void abort_call(std::error_code why) noexcept;
    /// Closes (idempotent); the pool stops counting this connection at once.
    void close_now() noexcept;
    /// Applies the call's body_paused flag to receiving (a streamed call only).
    void apply_body_pause() noexcept;

    /// Whether an idle connection may still be reused (lifetime, request count, its address
    /// still resolved).
    bool reusable(clock::time_point now) const noexcept;
    bool idle() const noexcept { return state_ == state::idle; }

    void on_connected(int result) noexcept override;
    void on_data(std::string_view bytes) noexcept override;
    void on_peer_closed(int result) noexcept override;
    void on_sent(int result) noexcept override;
    void on_closed() noexcept override;

    void on_response_head(client_response& head) noexcept override;
    void on_response_body(std::string_view bytes) noexcept override;

private:
    enum class state : std::uint8_t { connecting, busy, idle, closing };

    void send_request() noexcept;
    /// on_data's work: bytes for the session.
    void consume(std::string_view bytes) noexcept;
    /// resume_body() after a held body: hands over what was held, then reads on (the timer).
    void drain_held() noexcept;
    void broken(int result) noexcept;
    void complete(bool extra_bytes) noexcept;
    void finish_call(result<client_response> r) noexcept;
    void arm(std::chrono::milliseconds d) noexcept;
    static void on_timer(timer& t) noexcept;
    void timed_out() noexcept;

    std::shared_ptr<client_pool> pool_;
    loop& loop_;
    transport transport_;
    http::client_session session_;
    std::shared_ptr<client_call_state> call_;
    std::shared_ptr<client_call_state> sending_call_; // keeps the sent memory alive (driver rule 7)
    // The outcome of a call that ended while its request was still being sent: handed over at
    // op::close, when no send can read the request's memory any more (finish_call).
    std::optional<result<client_response>> answer_after_close_;
    // A retried call whose request was still being sent here: it goes to its fresh connection
    // at op::close, for the same reason.
    std::shared_ptr<client_call_state> retry_after_close_;
    timer timer_;
    clock::time_point created_;
    std::uint64_t served_ = 0;
    std::shared_ptr<upstream_address> address_; // held: a refresh may drop it from the set
    state state_ = state::connecting;
    bool from_pool_ = false;
    bool request_written_ = false;
    bool head_delivered_ = false; // a streamed call's on_head ran: response_timeout now spans reads
    // A streamed call whose body was paused when its head came: the session stopped after the
    // head (http::client_session::hold_body), and what arrived after it waits here for
    // resume_body(), with a peer's close that came meanwhile.
    static constexpr int no_close = 1;
    std::string held_;
    int held_close_ = no_close;
    bool drain_due_ = false; // the timer is armed to run drain_held(), not a timeout
};

} // namespace sluice::detail
