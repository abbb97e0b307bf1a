// The HTTP/1.1 server session: a sans-I/O state machine over llhttp.
//
// Bytes in, requests out; responses in, bytes out. No sockets, no threads, no
// clocks: the connection passes the time in and asks which deadline applies.
//
//              feed()                 feed()
//   [idle] ----------> [head] ----------------> [body] --+
//     ^  \ (complete head, no body)                      | (message complete)
//     |   +------------------------------------------+   |
//     |                                              v   v
//     +--------------- next_request() ----------- [ready]
//
//   any state --(bad syntax, limit)--> [failed]: error_status() says what to send,
//   then the connection closes. feed() never consumes bytes past a complete request,
//   so pipelined requests are answered strictly in order.
//
// Strict parsing: no lenient llhttp flags. Rejected with 400: bad syntax, bare LF
// where llhttp rejects it, Content-Length together with Transfer-Encoding, duplicate
// or conflicting Content-Length, a Transfer-Encoding whose final coding is not
// chunked (or any Transfer-Encoding in HTTP/1.0), HTTP/1.1 without exactly one Host,
// whitespace before a header's colon, a request-target byte that is not visible ASCII.
// 413: body over max_body_bytes (declared or received). 414: the request line alone
// over max_header_bytes. 431: the head over max_header_bytes. 501: an unknown method,
// CONNECT, or a transfer coding other than chunked. 505: an HTTP major version other
// than 1 (and 1.2+, which llhttp refuses). Upgrade is ignored; trailers are dropped.
#pragma once

#include <llhttp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/request.h>
#include <sluice/response.h>

#include "http/request_builder.h"

namespace sluice::http {

struct session_limits {
    std::size_t max_header_bytes = 8192;
    std::size_t max_body_bytes = std::size_t{1024} * 1024;
};

enum class phase {
    idle,   ///< no byte of the next request yet (keep-alive wait)
    head,   ///< receiving the request line and headers
    body,   ///< receiving the body
    ready,  ///< a complete request waits for its response
    failed, ///< an error response must be sent, then the connection closed
};

enum class feed_status { need_more, request_ready, failed };

struct feed_result {
    feed_status status = feed_status::need_more;
    std::size_t consumed = 0;
};

class server_session {
public:
    explicit server_session(const session_limits& limits) noexcept;
    server_session(const server_session&) = delete;
    server_session& operator=(const server_session&) = delete;

    /// Parses bytes into req (which must be empty when a request starts). Consumes up to the end
    /// of one complete request and stops there (request_ready), or stops at an error (failed).
    /// In phase ready or failed it consumes nothing.
    feed_result feed(std::string_view bytes, request& req);

    phase current_phase() const noexcept { return phase_; }

    /// True once per request when the head asked for "Expect: 100-continue", was accepted, and a
    /// body is still to come: the connection sends continue_response() before reading on.
    bool take_continue() noexcept;

    /// In phase failed: the status to answer (400, 408 is the connection's, 413, 414, 431, 501,
    /// 505) and a short reason for the log and the response body.
    int error_status() const noexcept { return error_status_; }
    std::string_view error_reason() const noexcept { return error_reason_; }

    /// Puts the session in phase failed with this status (used for timeouts: 408).
    void fail(int status, std::string_view reason) noexcept;

    /// After the response of the ready request was queued: back to idle for the next one.
    void next_request() noexcept;

    /// Back to idle from any phase, failed included (a session returning to a pool).
    void reset() noexcept;

    // llhttp callbacks reach the session through these (implementation detail).
    struct callbacks;

private:
    friend struct callbacks;
    llhttp_t parser_; // its settings are one shared, constant table: sessions stay small
    session_limits limits_;
    request* req_ = nullptr;
    phase phase_ = phase::idle;
    std::size_t head_bytes_ = 0; // head bytes handed to llhttp in earlier executes of this request
    int error_status_ = 0;
    std::string_view error_reason_;
    bool expect_continue_ = false;
    bool continue_pending_ = false;
    int host_headers_ = 0;
    // Where the header being received is: its name, past the colon, or in its value.
    enum class header_state : unsigned char { none, name, colon, value };
    header_state header_state_ = header_state::none;

    void reset_request_state() noexcept;
    void fail_head_too_large() noexcept;
    void fail_parse(llhttp_errno_t err, std::string_view input) noexcept;
    std::size_t head_offset(const char* p) const noexcept;
    bool line_break_before_value(std::size_t value_start) const noexcept;
    bool follows(std::size_t off, std::string_view text) const noexcept; // head bytes before off are text
    std::size_t line_breaks_between(std::size_t from, std::size_t to) const noexcept; // LFs in [from, to)
    void inspect_header(std::string_view name, std::string_view value) noexcept;
    int check_head() noexcept;

    // The head's bytes reach the request's arena in bulk (copy_head_until): at the end of each
    // llhttp_execute, and where a field must be read whole before then. A field is marked as
    // a range of them as llhttp reports it (mark), so a header costs no copy of its own.
    std::size_t mark(const char* at, std::size_t n) noexcept; // the arena offset of `at`
    void copy_head_until(std::size_t end);                    // head offset; may throw bad_alloc
    char head_byte(std::size_t off) const noexcept;           // from the arena or this piece
    std::string_view head_text(detail::request_builder::range r) const noexcept; // arena range

    const char* exec_begin_ = nullptr; // start of the bytes of the llhttp_execute in progress
    std::size_t version_end_ = 0;      // head offset just past the HTTP version, 0 before it
    std::size_t version_len_ = 0;      // bytes of the version ("1.1") seen so far
    std::size_t extra_bytes_ = 0;      // chunk extensions received
    std::size_t trailer_bytes_ = 0;    // bytes of the trailer section fed so far
    std::size_t last_lf_end_ = 0;      // head offset just past the last LF of earlier pieces, 0: none
    std::size_t head_base_ = 0;        // the arena offset of the head's first byte
    std::size_t copied_ = 0;           // head bytes already in the arena
    std::size_t span_end_ = 0;         // head offset just past the last piece of any field
    char name_last_ = '\0';            // the last byte of the header name being received
    bool version_done_ = false;        // llhttp accepted the version
    bool in_trailers_ = false;         // the last chunk's size line was read
    bool te_seen_ = false;             // Transfer-Encoding: the codings seen, in order
    bool te_last_chunked_ = false;
    bool te_other_coding_ = false;
    int te_chunked_count_ = 0;
};

/// How a response goes out: the connection decides, the serializer writes.
struct response_framing {
    http_version version{1, 1}; ///< of the request
    bool head_request = false;  ///< HEAD: no body bytes, but the GET headers
    bool keep_alive = true;     ///< the connection stays open after this response
    /// The status has no content (1xx, 204, 304; RFC 9110 §6.4.1): a stream sends its head
    /// only, no chunks and no last-chunk, whatever the handler wrote.
    bool no_content = false;
    /// Streaming: the length the handler declared (response::content_length). The head says
    /// Content-Length and the pieces go out unframed; the connection keeps the count.
    std::optional<std::uint64_t> content_length{};
};

/// RFC 9110 §6.4.1: false for 1xx, 204 and 304, which end with their head. Of the status as
/// sent: one outside 100..599 goes out as 500, which has content.
bool status_has_content(int status) noexcept;

/// Streaming: the body has neither a length nor chunks (HTTP/1.0) and ends when the connection
/// closes, so only the manner of the close tells a cut body from a whole one.
bool stream_ends_by_close(const response_framing& f) noexcept;

/// "HTTP/1.1 100 Continue\r\n\r\n"
std::string_view continue_response() noexcept;

/// Appends a whole response: status line, the handler's headers, Date (unless the handler set
/// one), Content-Length (or none for 1xx/204/304), Connection as needed, then the body
/// (omitted for HEAD, 1xx, 204, 304). A status outside 100..599 is sent as 500.
void serialize_response(const response& res, const response_framing& f, std::string_view date,
                        std::string& out);

/// Streaming: the head with Transfer-Encoding: chunked (HTTP/1.1) or no length (HTTP/1.0, which
/// then forces keep_alive = false), a chunk, and the end of the stream. With f.content_length
/// the head has Content-Length (any version), chunks go out raw and the end writes nothing:
/// the caller keeps the count. With f.no_content (204, 304) the head has neither and the
/// chunks and the end write nothing.
void serialize_stream_head(const response& res, const response_framing& f, std::string_view date,
                           std::string& out);
void serialize_chunk(std::string_view data, const response_framing& f, std::string& out);
void serialize_stream_end(const response_framing& f, std::string& out);

/// A complete error response with a short text body and "Connection: close". For a HEAD
/// request (`head`) the head alone, with the length the text would have (RFC 9110 §9.3.2).
void serialize_error(int status, std::string_view reason, http_version v, bool head, std::string_view date,
                     std::string& out);

/// The IMF-fixdate of the current second, recomputed at most once a second.
class date_cache {
public:
    /// `now` is wall-clock time; the text changes only when its second changes.
    std::string_view get(std::chrono::system_clock::time_point now) noexcept;

private:
    std::int64_t second_ = -1;
    char text_[32] = {};
    std::size_t len_ = 0;
};

} // namespace sluice::http
