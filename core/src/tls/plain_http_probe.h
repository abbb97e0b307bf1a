// Plaintext HTTP on a TLS port: how the first bytes of a connection are told apart from TLS, and
// the 400 that answers them (nginx's "plain HTTP request was sent to HTTPS port", as an answer
// a curl or a browser shows instead of a bare close).
//
// A TLS connection starts with a record whose type byte is 0x16 (an SSLv2-style hello with a
// byte >= 0x80); an HTTP/1.x request starts with its method, a token that in practice is upper
// case letters (RFC 9110 §9.1 registers no other kind). So the first byte decides whether
// OpenSSL sees the connection at all: an upper case letter never reaches it, and then at most
// max_probe_bytes say whether a request line begins.
#pragma once

#include <cstddef>
#include <string_view>

namespace sluice::detail {

/// The most bytes the probe looks at: the longest method it accepts plus its space.
inline constexpr std::size_t max_probe_bytes = 8;

/// Whether a connection whose first byte is `first` may be plaintext HTTP (then the probe holds
/// its bytes back from OpenSSL); false for TLS and for any other byte, which OpenSSL judges.
constexpr bool may_be_plain_http(char first) noexcept {
    return first >= 'A' && first <= 'Z';
}

enum class plain_probe {
    need_more,    ///< a method token so far: wait for more bytes
    request_line, ///< a method of 3 to 7 upper case letters and a space: answer plain_http_reply
    neither,      ///< neither TLS nor a request line: close
};

/// Classifies the first bytes of a connection (at most max_probe_bytes are looked at).
plain_probe probe_plain_http(std::string_view first_bytes) noexcept;

/// Appends the 400 response that answers a plaintext request on a TLS port, with
/// `Connection: close` (the connection ends after it).
void append_plain_http_reply(std::string& out);

} // namespace sluice::detail
