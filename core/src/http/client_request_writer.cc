// Serialising upstream requests. Everything a handler passes through from its own client is
// checked here, because a header value with CR LF would let a downstream client inject a
// second request into the upstream connection (request smuggling by splitting).
#include "http/client_request_writer.h"

#include <string_view>

#include <sluice/request.h>

#include "http/tokens.h"

namespace sluice::http {

namespace {

bool is_token(std::string_view s) noexcept {
    if (s.empty()) {
        return false;
    }
    for (const char c : s) {
        if (!is_tchar(c)) {
            return false;
        }
    }
    return true;
}

// field-value (RFC 9110 §5.5): no CR, LF or NUL; other controls are tolerated as senders do.
bool is_safe_value(std::string_view v) noexcept {
    return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

bool is_safe_target(std::string_view method, std::string_view t) noexcept {
    if (t.empty() || (t.front() != '/' && !(t == "*" && method == "OPTIONS"))) {
        return false;
    }
    for (const char ch : t) {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c >= 0x7f) {
            return false;
        }
    }
    return true;
}

} // namespace

// Whether `name` appears in a comma-separated Connection value.
bool listed_in(std::string_view list, std::string_view name) noexcept {
    while (!list.empty()) {
        const auto comma = list.find(',');
        std::string_view item = list.substr(0, comma);
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) {
            item.remove_prefix(1);
        }
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) {
            item.remove_suffix(1);
        }
        if (iequals(item, name)) {
            return true;
        }
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return false;
}

namespace {

bool method_expects_body(std::string_view m) noexcept {
    return m == "POST" || m == "PUT" || m == "PATCH";
}

} // namespace

bool is_hop_by_hop(std::string_view name, const client_request& req) noexcept {
    // Content-Length too: the client frames the body it sends itself.
    return iequals(name, "content-length") || is_hop_by_hop_header(name, req.headers);
}

bool is_idempotent(std::string_view m) noexcept {
    return m == "GET" || m == "HEAD" || m == "OPTIONS" || m == "TRACE" || m == "PUT" || m == "DELETE";
}

std::error_code write_request_head(const client_request& req, std::string_view default_host, std::string& out,
                                   std::size_t* default_host_at) {
    if (!is_token(req.method) || !is_safe_target(req.method, req.target)) {
        return client_errc::invalid_request;
    }
    const std::string_view* host = nullptr;
    std::string_view own_host;
    // The head stays in memory while the call is in flight (a retry resends it): one
    // allocation of its exact size (an upper bound: hop-by-hop headers are counted too) rather
    // than the doublings of appending, which for a 3-s upstream were ~240 bytes per request.
    std::size_t size = req.method.size() + req.target.size() + 64; // line, Host, Content-Length
    for (const auto& h : req.headers) {
        if (!is_token(h.name) || !is_safe_value(h.value)) {
            return client_errc::invalid_request;
        }
        if (host == nullptr && iequals(h.name, "host")) {
            own_host = h.value;
            host = &own_host;
        }
        size += h.name.size() + h.value.size() + 4;
    }
    size += host != nullptr ? host->size() : default_host.size();
    out.reserve(out.size() + size);
    out.append(req.method).append(" ").append(req.target).append(" HTTP/1.1\r\nHost: ");
    if (default_host_at != nullptr) {
        *default_host_at = host != nullptr ? std::string::npos : out.size();
    }
    out.append(host != nullptr ? *host : default_host).append("\r\n");
    for (const auto& h : req.headers) {
        if (iequals(h.name, "host") || is_hop_by_hop(h.name, req)) {
            continue;
        }
        out.append(h.name).append(": ").append(h.value).append("\r\n");
    }
    const std::string_view body = request_body(req);
    if (!body.empty() || method_expects_body(req.method)) {
        out.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
    }
    out.append("\r\n");
    return {};
}

} // namespace sluice::http

namespace sluice {

bool is_hop_by_hop_header(std::string_view name, const std::vector<client_header>& headers) noexcept {
    static constexpr std::string_view fixed[] = {"connection", "keep-alive", "te",
                                                 "trailer",    "upgrade",    "transfer-encoding"};
    for (const auto f : fixed) {
        if (iequals(name, f)) {
            return true;
        }
    }
    if (name.size() >= 6 && iequals(name.substr(0, 6), "proxy-")) {
        return true;
    }
    for (const auto& h : headers) {
        if (iequals(h.name, "connection") && http::listed_in(h.value, name)) {
            return true;
        }
    }
    return false;
}

} // namespace sluice
