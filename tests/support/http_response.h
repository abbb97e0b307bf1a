// A parsed HTTP/1.1 response as a test sees it, and a small strict parser for one.
//
// The parser is independent of the server's own engine on purpose: the conformance tests
// are a second opinion on the bytes the server sends, so they must not share its code.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::test {

struct http_response {
    std::string version; ///< "HTTP/1.1"
    int status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers; ///< in order, as received
    std::string body;                                         ///< de-chunked
    bool chunked = false;
    std::vector<std::string> chunks; ///< chunked: each chunk's data, in order
    bool delimited_by_close = false; ///< no Content-Length and not chunked: the body ran to EOF

    /// The first header of that name (ASCII case-insensitive).
    std::optional<std::string> header(std::string_view name) const;
    /// How many headers have that name.
    std::size_t header_count(std::string_view name) const;
    /// A Connection header that says close (the server will close after this response).
    bool says_close() const;
    /// 1xx: an interim response, followed by the final one.
    bool is_interim() const noexcept { return status >= 100 && status < 200; }
};

/// How to find the end of the body (RFC 9112 §6.3): a response to HEAD has none.
enum class body_rule { normal, head_request };

enum class parse_status { incomplete, complete, malformed };

struct parse_outcome {
    parse_status status = parse_status::incomplete;
    std::size_t consumed = 0; ///< complete: bytes of this response
    http_response response;
    std::string error; ///< malformed: why
};

/// Parses one response from the start of data. `eof` says the peer closed after data, which
/// completes a close-delimited body.
parse_outcome parse_response(std::string_view data, bool eof, body_rule rule = body_rule::normal);

/// Bytes made printable for failure messages ("\r\n" shown as such, long input cut).
std::string printable(std::string_view bytes, std::size_t max = 600);

/// ASCII case-insensitive comparison (header names).
bool same_name(std::string_view a, std::string_view b) noexcept;

} // namespace sluice::test
