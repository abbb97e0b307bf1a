// Writing a client_request as HTTP/1.1 bytes for the upstream.
#pragma once

#include <string>
#include <string_view>
#include <system_error>

#include <sluice/client.h>

namespace sluice::http {

/// Whether a header is hop-by-hop (RFC 9110 §7.6.1) or framing that the client writes itself:
/// Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-*, Transfer-Encoding, Content-Length,
/// or a name listed in one of the request's Connection headers.
bool is_hop_by_hop(std::string_view name, const client_request& req) noexcept;

/// Appends the request line and head to `out` (the body is sent from the request's own
/// memory): method, target, Host (the request's own, else `default_host`), the end-to-end
/// headers, Content-Length when there is a body or the method usually has one. No Connection
/// header: HTTP/1.1 is persistent without one (RFC 9112 §9.3), and the client never asks to
/// close. Returns invalid_request, writing nothing, when a method is not a token, the target
/// is not visible ASCII starting with '/' (or "*" for OPTIONS), or a field holds CR, LF or NUL
/// (response splitting) or a name is not a token. `default_host_at`, when given, receives
/// where in `out` default_host was written (npos when the request has its own Host).
std::error_code write_request_head(const client_request& req, std::string_view default_host, std::string& out,
                                   std::size_t* default_host_at = nullptr);

/// The body to send: body_view when set, else body.
inline std::string_view request_body(const client_request& req) noexcept {
    return req.body_view.data() != nullptr ? req.body_view : std::string_view(req.body);
}

/// Whether `name` is among the comma-separated tokens of a Connection value.
bool listed_in(std::string_view list, std::string_view name) noexcept;

/// RFC 9110 §9.2.2: may be repeated with the same effect (GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
bool is_idempotent(std::string_view method) noexcept;

} // namespace sluice::http
