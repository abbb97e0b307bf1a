#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>

#include <sluice/forwarding.h>

#include "http/server_session.h"
#include "http/tokens.h"

namespace sluice {

namespace {

using http::is_tchar;

} // namespace

void strip_hop_by_hop(std::vector<client_header>& headers) {
    // Decide for every field against the list as received, then drop: removing Connection
    // first would forget the fields it names.
    std::vector<bool> drop(headers.size());
    for (std::size_t i = 0; i < headers.size(); ++i) {
        drop[i] = is_hop_by_hop_header(headers[i].name, headers);
    }
    std::size_t out = 0;
    for (std::size_t i = 0; i < headers.size(); ++i) {
        if (!drop[i]) {
            if (out != i) {
                headers[out] = std::move(headers[i]);
            }
            ++out;
        }
    }
    headers.resize(out);
}

std::vector<client_header> forwardable_headers(const request& req) {
    std::vector<client_header> all;
    // + X-Forwarded-Host here, and X-Forwarded-For and Forwarded that a proxy appends next.
    all.reserve(req.header_count() + 3);
    std::optional<std::string_view> host;
    for (const auto h : req.headers()) {
        if (iequals(h.name, "host")) {
            host = host ? host : std::optional(h.value);
            continue;
        }
        // A client's X-Forwarded-Host is not passed on: ours names the host this hop received,
        // and the field has no chain an upstream could tell a spoofed value in (unlike
        // X-Forwarded-For, which append_forwarded_for extends).
        if (iequals(h.name, "content-length") || iequals(h.name, "x-forwarded-host")) {
            continue;
        }
        // "Expect: 100-continue" was met by this hop, which has the whole body (RFC 9110
        // §10.1.1); an upstream must not be asked again, nor given the chance to refuse it.
        if (iequals(h.name, "expect") && iequals(h.value, "100-continue")) {
            continue;
        }
        all.push_back({std::string(h.name), std::string(h.value)});
    }
    strip_hop_by_hop(all);
    // RFC 9112 §3.2.2: an absolute-form target's authority is the host, whatever Host says.
    if (const http::target_authority a = http::absolute_form_authority(req.target()); a.is_absolute) {
        host = a.authority;
    }
    if (host && !host->empty()) {
        all.push_back({"X-Forwarded-Host", std::string(*host)});
    }
    return all;
}

std::string_view peer_host(std::string_view peer) noexcept {
    if (!peer.empty() && peer.front() == '[') {
        const auto close = peer.find(']');
        return close == std::string_view::npos ? peer : peer.substr(1, close - 1);
    }
    const auto colon = peer.rfind(':');
    if (colon != std::string_view::npos && peer.find(':') == colon) {
        return peer.substr(0, colon); // "1.2.3.4:5678"; a bare IPv6 address keeps its colons
    }
    return peer;
}

void append_forwarded_for(std::vector<client_header>& headers, std::string_view peer) {
    const std::string_view ip = peer_host(peer);
    const std::string node = ip.empty() ? std::string("unknown") : std::string(ip);
    // RFC 7239 §6: an IPv6 node is bracketed, and then must be a quoted-string.
    const std::string forwarded_node = node.find(':') != std::string::npos ? "\"[" + node + "]\"" : node;
    // X-Forwarded-For: one list; several fields would be joined with commas by a recipient
    // (RFC 9110 §5.3), so appending to the last one keeps the order.
    auto last_xff = std::find_if(headers.rbegin(), headers.rend(),
                                 [](const client_header& h) { return iequals(h.name, "x-forwarded-for"); });
    if (last_xff != headers.rend() && !last_xff->value.empty()) {
        last_xff->value += ", " + node;
    } else if (last_xff != headers.rend()) {
        last_xff->value = node;
    } else {
        headers.push_back({"X-Forwarded-For", node});
    }
    auto last_fwd = std::find_if(headers.rbegin(), headers.rend(),
                                 [](const client_header& h) { return iequals(h.name, "forwarded"); });
    if (last_fwd != headers.rend() && !last_fwd->value.empty()) {
        last_fwd->value += ", for=" + forwarded_node;
    } else if (last_fwd != headers.rend()) {
        last_fwd->value = "for=" + forwarded_node;
    } else {
        headers.push_back({"Forwarded", "for=" + forwarded_node});
    }
}

std::optional<std::string_view> forwarding_refusal(const request& req) {
    if (req.method() == "CONNECT") {
        return "CONNECT is not forwarded";
    }
    const std::string_view target = req.target();
    const auto starts_with = [&](std::string_view prefix) {
        return target.size() > prefix.size() && iequals(target.substr(0, prefix.size()), prefix);
    };
    const bool origin_form = !target.empty() && target.front() == '/';
    if (!origin_form && !starts_with("http://") && !starts_with("https://")) {
        return "the target is not in origin-form or absolute-form"; // "*" (OPTIONS) included
    }
    for (const char c : target) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u >= 0x7f) {
            return "a byte outside visible ASCII in the target";
        }
    }
    for (const auto h : req.headers()) {
        if (h.name.empty() || !std::all_of(h.name.begin(), h.name.end(), is_tchar)) {
            return "a header name that is not a token";
        }
        for (const char c : h.value) {
            const auto u = static_cast<unsigned char>(c);
            if ((u < 0x20 && c != '\t') || u == 0x7f) {
                return "a control character in a header value";
            }
        }
    }
    return std::nullopt;
}

std::string origin_target(const request& req) {
    const std::string_view target = req.target();
    if (!target.empty() && target.front() == '/') {
        return std::string(target);
    }
    // absolute-form: "http://authority/path?query" → "/path?query" (RFC 9112 §3.2.2).
    const auto scheme_end = target.find("://");
    const auto path = scheme_end == std::string_view::npos ? std::string_view::npos
                                                           : target.find_first_of("/?", scheme_end + 3);
    if (path == std::string_view::npos) {
        return "/";
    }
    return target[path] == '?' ? "/" + std::string(target.substr(path)) : std::string(target.substr(path));
}

std::optional<std::uint64_t> content_length_of(const client_response& from) {
    const auto v = from.header("Content-Length");
    if (!v) {
        return std::nullopt;
    }
    std::uint64_t n = 0;
    const auto r = std::from_chars(v->data(), v->data() + v->size(), n);
    if (r.ec != std::errc{} || r.ptr != v->data() + v->size()) {
        return std::nullopt;
    }
    return n;
}

namespace {

void copy_head(const client_response& from, response& to) {
    to.status(from.status);
    for (const auto& h : from.headers) {
        if (is_hop_by_hop_header(h.name, from.headers) || iequals(h.name, "content-length")) {
            continue;
        }
        try {
            to.add_header(h.name, h.value);
        } catch (const std::invalid_argument&) {
            // A field this server may not send (the client checked its syntax; this is a
            // second line of defence): dropped rather than forwarded broken.
        }
    }
    // A response to HEAD (or a 304) has a Content-Length and no body: the length is the one
    // the body would have (RFC 9110 §8.6, §9.3.2). Declared, the server sends it as it is
    // instead of framing the empty body as Content-Length: 0; a body streamed after it is held
    // to it. A length of 0 needs no declaration: the whole empty body gets the same.
    if (from.body.empty()) {
        if (const auto n = content_length_of(from); n && *n > 0) {
            to.content_length(*n);
        }
    }
}

// The answer to a HEAD without a Content-Length (its GET would be chunked, or end with the
// connection): the length the body would have is unknown, and framing the empty body would
// claim Content-Length: 0 (RFC 9110 §9.3.2). As a stream it declares no length: a chunked
// head, and no body, as for any HEAD. (For a GET an empty body is the whole body.)
void mark_length_unknown(const client_response& from, response& to, std::string_view method) {
    if (method == "HEAD" && http::status_has_content(from.status) && from.body.empty() &&
        !to.content_length() && !content_length_of(from)) {
        to.write({});
    }
}

} // namespace

void copy_response(const client_response& from, response& to, std::string_view method) {
    copy_head(from, to);
    to.body(from.body);
    mark_length_unknown(from, to, method);
}

void copy_response(client_response&& from, response& to, std::string_view method) {
    copy_head(from, to);
    mark_length_unknown(from, to, method); // before the body moves: it looks at from.body
    to.body(std::move(from.body));
}

} // namespace sluice
