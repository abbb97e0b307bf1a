// One upstream response streamed to the downstream client, with backpressure both ways: the
// gateway's async and resume styles (styles.cc) run every route through it.
//
//   upstream (client loop)                     downstream (the exchange)
//   on_head ---------------------------------> wake: the handler writes status + headers
//   on_body: append to pending;                wake when drained: the handler write()s pending,
//            pending >= high_water: pause_body  suspends, and asks on_drained
//   on_end ----------------------------------> wake: the handler ends the exchange (or cuts the
//                                              stream when the body was cut upstream)
//   on_drained (output <= output_low_water): resume_body, wake if pending
//
// So the gateway holds at most high_water + what the upstream's socket delivered after the pause
// in `pending` (one read on epoll; a multishot batch on io_uring), and the server at most
// output_low_water + max_write in queued output, whatever the response size. A response that
// is whole before its head is written goes out with Content-Length, as it came (in the async
// style on epoll/uring through complete() from on_end: no re-dispatch at all, the head's wake
// being posted behind the rest of its read; see on_head).
//
// Threads: the client's callbacks run on the call's loop (the exchange's loop on epoll/uring,
// the client's own loop on blocking); the handler runs on the loop or a worker (dispatch =
// pool); on_drained on the exchange's loop. Everything shared is under one mutex, and the
// handler touches the exchange only in its own dispatch (lifecycle rule 2).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include <sluice/sluice.h>

namespace gateway {

struct gateway;

/// How a relay ends the exchange once the upstream's response is whole.
enum class relay_finish {
    complete_from_callback, ///< async style: a response whole before its head went out is sent by complete()
    resume,                 ///< resume style: the handler always writes what came
};

class relay : public std::enable_shared_from_this<relay> {
public:
    /// Bytes kept for the downstream before the upstream is paused.
    static constexpr std::size_t high_water = std::size_t{64} * 1024;
    /// The most one dispatch writes downstream; the rest waits for the next drain.
    static constexpr std::size_t max_write = 4 * high_water;

    /// The initial dispatch: suspends `ex` and starts the streamed upstream call.
    static void start(gateway& g, sluice::exchange& ex, sluice::client_request up, relay_finish how);
    /// A resumed dispatch of a relayed exchange: writes what came; false if `ex` has no relay.
    static bool on_resumed(sluice::exchange& ex);

    explicit relay(relay_finish how) : how_(how) {}

private:
    void on_head(sluice::client_response head);
    /// The async style's deferred head wake: runs on the exchange's loop after the read that
    /// brought the head, so a response whose end came in that read was completed meanwhile.
    void on_head_settled();
    void on_body(std::string_view piece);
    void on_end(std::error_code e);
    void on_drained();
    void cancel();
    void dispatch(sluice::exchange& ex);
    /// Under mu_: the async_context to resume now (empty: not now).
    sluice::async_context take_wake();

    const relay_finish how_;
    sluice::executor exec_;   // the exchange's loop; set before the call starts, then only read
    std::string_view method_; // "HEAD" for a HEAD (sluice::copy_response), else empty; set at start
    std::mutex mu_;
    sluice::client_call call_;
    sluice::async_context ctx_; // the current suspension; empty while the handler runs or was woken
    std::optional<sluice::client_response> head_;
    std::string pending_;
    std::error_code end_error_;
    bool ended_ = false;
    bool head_out_ = false;        // the status and headers went to the exchange
    bool drained_ = true;          // the downstream has taken what was written
    bool upstream_paused_ = false; // pause_body() asked
    bool head_held_ = false;       // async style: the head's wake waits for on_head_settled
    bool call_set_ = false;
};

} // namespace gateway
