// The HTTP/1.1 client session: a sans-I/O response parser over llhttp (response mode).
//
// Bytes in, one response out. No sockets, no threads, no clocks.
//
//   begin(head_request)          feed() ... (1xx responses are dropped: back to head)
//   [idle] ----------> [head] ----------> [body] ----------> [complete]
//                                           (hold_body(): feed() stops at the start of the body)
//                         \                  \   finish() at end of stream (close-delimited body)
//                          +------------------+---> [failed]: error() says malformed or too large
//
// Strict: the status line must say HTTP/1.x (no HTTP/0.9, whose "response" is any bytes);
// Content-Length together with Transfer-Encoding, duplicate Content-Length, a transfer coding
// other than a final chunked (RFC 9112 §6.3 would read such a body to the end of the
// connection; a proxy must not guess), whitespace before a colon, and 101 (we never ask for an
// upgrade) fail it. A response to HEAD, and 204 / 304, end with their head. Trailer fields are
// dropped. max_response_bytes bounds the head and body together; when a response_sink streams
// the body, it bounds the head only (the body is not kept, so its size costs nothing here).
// max_head_bytes bounds the head alone, the 1xx responses before it included.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <string_view>
#include <system_error>

#include <sluice/client.h>

namespace sluice::http {

enum class response_phase { idle, head, body, complete, failed };

/// Where a streamed response goes: the head of the final response (1xx are not shown), then
/// its body in pieces. Called from inside feed(); the bytes are lent until return. A sink must
/// not begin() or destroy the session from these calls.
class response_sink {
public:
    virtual void on_response_head(client_response& head) noexcept = 0;
    virtual void on_response_body(std::string_view bytes) noexcept = 0;

protected:
    ~response_sink() = default;
};

class client_session {
public:
    /// The most header fields one head may have (trailers are dropped, not counted): each
    /// costs a client_header beside its bytes, so a head of tiny fields would otherwise cost
    /// many times max_response_bytes. Beyond: response_too_large.
    static constexpr std::size_t max_fields = 1000;

    client_session(std::size_t max_response_bytes, std::size_t max_head_bytes) noexcept;
    client_session(const client_session&) = delete;
    client_session& operator=(const client_session&) = delete;

    /// Expects the response to the next request; `out` receives it and must outlive the feeds.
    /// With a sink, `out` receives the head only and the body goes to the sink.
    void begin(bool head_request, client_response& out, response_sink* sink = nullptr) noexcept;

    /// Parses bytes; returns how many were consumed (it stops at the end of the response, so
    /// bytes past it — which a well-behaved upstream never sends — stay with the caller). It
    /// also stops right after a final head when the sink called hold_body() from inside
    /// on_response_head; the next feed() goes on from there.
    std::size_t feed(std::string_view bytes) noexcept;
    /// From inside the sink's on_response_head: stop the parse after this head, so that no byte
    /// of the body is parsed (nor handed to the sink) before the next feed(). Not for a
    /// response to HEAD, whose end comes with its head anyway.
    void hold_body() noexcept { hold_wanted_ = true; }
    /// feed() stopped after the head (hold_body()): the bytes it did not consume are the body.
    bool holding() const noexcept { return holding_; }
    /// Ends a hold: the parse goes on after the head, and what it does without a byte happens
    /// now (a body of length 0 completes here). feed() and finish() do it themselves.
    void release() noexcept;
    /// The upstream closed its side: a close-delimited body completes; anything else unfinished
    /// fails (the caller reports reset when no byte of the response arrived, else malformed).
    void finish() noexcept;

    response_phase phase() const noexcept { return phase_; }
    /// Any byte of a response (a 1xx included) has been received since begin().
    bool started() const noexcept { return received_ > 0; }
    /// After complete: whether the connection may carry another request (HTTP/1.1 without
    /// "Connection: close", or HTTP/1.0 with keep-alive, and a self-delimited body).
    bool keep_alive() const noexcept { return keep_alive_; }
    /// In failed: malformed_response, response_too_large, or reset (finish() before the end).
    std::error_code error() const noexcept { return error_; }

    struct callbacks; // llhttp reaches the session through these

private:
    friend struct callbacks;
    void fail(client_errc e) noexcept;
    void reset_message() noexcept;
    void inspect_codings(std::string_view value) noexcept;

    llhttp_t parser_;
    client_response* out_ = nullptr;
    response_sink* sink_ = nullptr;
    std::size_t max_bytes_;
    std::size_t max_head_bytes_;
    std::size_t received_ = 0;
    response_phase phase_ = response_phase::idle;
    std::error_code error_;
    bool head_request_ = false;
    bool keep_alive_ = false;
    bool in_value_ = false; // the last header callback filled a value
    bool in_name_ = false;  // ... or a name
    bool te_seen_ = false;
    bool te_chunked_last_ = false;
    bool te_other_ = false;
    bool hold_wanted_ = false; // hold_body() was called in this on_response_head
    bool holding_ = false;     // llhttp is paused after the head (HPE_PAUSED from on_headers_complete)
};

} // namespace sluice::http
