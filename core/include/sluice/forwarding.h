// Helpers for proxies: pure functions over header lists, used by the gateway (apps/gateway) and
// by anyone forwarding a request to an upstream with sluice::client.
//
//   sluice::client_request up{.method = std::string(req.method()), .target = origin_target(req)};
//   if (auto why = sluice::forwarding_refusal(req)) { 400 ... }
//   up.headers = sluice::forwardable_headers(req);          // hop-by-hop, Host, framing gone
//   sluice::append_forwarded_for(up.headers, req.remote_address());
//   ...
//   sluice::copy_response(upstream_response, ex.response(), req.method()); // hop-by-hop, framing gone
//
// Hop-by-hop (RFC 9110 §7.6.1): Connection, Keep-Alive, TE, Trailer, Transfer-Encoding,
// Upgrade, every Proxy-* field (Proxy-Authenticate, Proxy-Authorization, Proxy-Connection),
// and every field named in a Connection header. They describe one connection and are never
// forwarded, in either direction. The rule is client.h's is_hop_by_hop_header(), which the
// client applies to its requests too: one rule for both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/client.h>
#include <sluice/request.h>
#include <sluice/response.h>

namespace sluice {

/// Removes every hop-by-hop field (see above) from a header list, in place; keeps the order of
/// the rest. Either direction: a request to an upstream, or a response from one.
void strip_hop_by_hop(std::vector<client_header>& headers);

/// The request's end-to-end headers for an upstream request: hop-by-hop fields removed, and
/// also Host and Content-Length (the client writes the upstream's Host and its own framing;
/// the original Host goes on as X-Forwarded-Host, in place of any the client sent). Order and
/// repeated fields are kept.
std::vector<client_header> forwardable_headers(const request& req);

/// Appends the peer to X-Forwarded-For (", ip" to the last such field, or a new one) and a
/// Forwarded element "for=ip" (RFC 7239 §4; an IPv6 address quoted and bracketed). `peer` is
/// request::remote_address(): "1.2.3.4:5678" or "[::1]:5678"; a port is dropped.
void append_forwarded_for(std::vector<client_header>& headers, std::string_view peer);

/// The address part of a remote_address ("1.2.3.4", "::1").
std::string_view peer_host(std::string_view peer) noexcept;

/// Why the request cannot be forwarded byte-exact and safe, or nullopt when it can: a header
/// name that is not a token, a value with a control character (other than HTAB) or DEL, a
/// target that is neither origin-form nor absolute-form, a CONNECT or an asterisk-form.
/// (Obsolete line folding and conflicting framing never reach a handler: the server answers
/// them with 400.)
std::optional<std::string_view> forwarding_refusal(const request& req);

/// The request's target in origin-form ("/path?query"), also when it came in absolute-form.
std::string origin_target(const request& req);

/// Copies an upstream response into `to`: status, end-to-end headers (hop-by-hop fields and
/// the upstream's Content-Length / Transfer-Encoding removed: the server frames the body
/// itself) and body. A header the server may not send (it throws) is skipped.
///
/// Except when `from` has a Content-Length n > 0 and no body — the answer to a HEAD, a 304,
/// or the head of a streamed call (client_body_stream::head(), client_stream_handler::on_head)
/// — then n becomes `to`'s declared length (response::content_length): a HEAD gets the
/// length a GET would have, and a body written after the head is held to the upstream's
/// framing. So a client_response made by hand with a length and no body answers a GET with
/// a cut body.
///
/// `method` is that of the request `to` answers. For "HEAD", a `from` without Content-Length
/// (its GET would be chunked, or end with the connection) makes `to` a stream that declares no
/// length (response::write): a chunked head, where framing the empty body would claim
/// Content-Length: 0.
void copy_response(const client_response& from, response& to, std::string_view method = {});
/// The same, moving the body instead of copying it.
void copy_response(client_response&& from, response& to, std::string_view method = {});

/// The response's Content-Length as a number; nullopt when it has none, or one that is not
/// a plain decimal within 64 bits (the client refuses such responses before they get here).
std::optional<std::uint64_t> content_length_of(const client_response& from);

} // namespace sluice
