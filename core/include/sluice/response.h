// An HTTP response under construction.
//
// Headers are kept serialized ("Name: value\r\n") in one string, so building a
// response allocates nothing once the exchange's buffers have warmed up, and
// serialization is a copy. The server adds Date, Content-Length or
// Transfer-Encoding, and Connection itself; a handler that sets them is overridden
// (Content-Length / Transfer-Encoding / Connection) or keeps its own (Date).
//
// Streaming: write() switches the response to chunked streaming. What was written
// is sent as one chunk each time the handler returns (also when it suspends with
// start_async()), and the stream ends when the exchange completes. HTTP/1.0 clients
// get the same bytes unframed, delimited by closing the connection. A status without
// content (204, 304) sends the head only, whatever was written. A status outside 100..599
// or any 1xx (101 included: Upgrade is not supported) is sent as 500.
//
// Declared length: content_length(n) before the head goes out (Servlet's
// setContentLengthLong) makes the response a stream whose head carries "Content-Length: n"
// and no Transfer-Encoding, on HTTP/1.0 too (keep-alive then works as for a whole body); the
// written pieces go out as they are. The server keeps the framing true: bytes beyond n are
// never sent, the connection closes and the exchange ends with
// exchange_errc::content_length_mismatch (on_error too while it is suspended); an exchange
// that ends with fewer than n bytes written has its connection closed after them (the client
// sees a cut body) and ends with the same error. Exactly n keeps the connection. HEAD gets
// the head with Content-Length: n; 204 and 304 their head only, as for any stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

namespace detail {
class response_access;
}

class response {
public:
    response() = default;
    explicit response(int status) : status_(status) {}

    response& status(int code) noexcept {
        status_ = code;
        return *this;
    }
    int status() const noexcept { return status_; }

    /// Sets a header, replacing every earlier one of that name (case-insensitive).
    /// Throws std::invalid_argument on a name that is not a token or a value with CR, LF or NUL.
    response& header(std::string_view name, std::string_view value);
    /// Adds a header, keeping earlier ones of that name (Set-Cookie).
    response& add_header(std::string_view name, std::string_view value);
    /// Removes every header of that name; returns how many were removed.
    std::size_t remove_header(std::string_view name);
    /// The first header of that name, nullopt if absent.
    std::optional<std::string_view> header(std::string_view name) const noexcept;
    /// The headers as serialized, "Name: value\r\n" each.
    std::string_view raw_headers() const noexcept { return headers_; }

    response& content_type(std::string_view type) { return header("Content-Type", type); }
    response& body(std::string b) {
        body_ = std::move(b);
        return *this;
    }
    /// text/plain; charset=utf-8
    response& text(std::string b);
    /// application/json
    response& json(std::string b);
    /// text/html; charset=utf-8
    response& html(std::string b);
    const std::string& body() const noexcept { return body_; }
    std::string& body() noexcept { return body_; }

    /// Appends to a chunked stream (see the header comment).
    response& write(std::string_view chunk);
    bool is_streaming() const noexcept { return streaming_; }
    /// The stream's head has gone to the connection (Servlet's isCommitted): from here on a
    /// failure can only cut the stream, and a handler that throws closes the connection. Before
    /// it, a written piece is still only in this object: the handler may replace the response
    /// (an error status of its choosing), and a throw is answered 500. The head goes out when
    /// the handler returns suspended or done, not at write(); a resume() accepted before the
    /// handler returned re-dispatches with nothing sent.
    bool is_committed() const noexcept { return head_sent_; }

    /// Declares the length of the streamed body: the head carries "Content-Length: n" instead
    /// of chunked framing, and the server enforces it (see the header comment). Makes the
    /// response a stream (a body set before, or after, is its first piece). Throws
    /// std::logic_error once the stream's head went out with another framing.
    response& content_length(std::uint64_t n);
    /// The declared length, nullopt if none.
    std::optional<std::uint64_t> content_length() const noexcept { return declared_length_; }

    /// Back to a fresh 200 with no headers and no body, keeping capacity.
    void clear() noexcept;

private:
    friend class detail::response_access;
    void set_header_unchecked(std::string_view name, std::string_view value, bool replace);

    int status_ = 200;
    std::string headers_;
    std::string body_;                             // whole body, or in streaming mode the bytes not sent yet
    std::optional<std::uint64_t> declared_length_; // streaming: the Content-Length to send
    bool streaming_ = false;
    bool head_sent_ = false; // streaming: the status line and headers went out
};

/// The standard reason phrase of a status code ("Not Found"); "Unknown" for others.
std::string_view reason_phrase(int status) noexcept;

} // namespace sluice
