// An HTTP request as the handler sees it. Read-only for handlers.
//
// Storage: every byte of the request head lives in one arena string owned by the
// request, and fields are offsets into it, so a request costs no allocation per
// header, and a recycled request keeps its capacity (no allocation per request in
// steady state). Views returned here stay valid until the exchange completes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/tls_info.h>

namespace sluice {

namespace detail {
class request_builder;
}

struct http_version {
    std::uint8_t major = 1;
    std::uint8_t minor = 1;
    friend bool operator==(http_version, http_version) = default;
};

/// ASCII case-insensitive equality, as header names compare (RFC 9110 §5.1).
bool iequals(std::string_view a, std::string_view b) noexcept;

/// Decodes %XX escapes (and '+' as space when `plus_is_space`); nullopt on a malformed escape.
enum class plus_decoding { keep, as_space };
std::optional<std::string> percent_decode(std::string_view in, plus_decoding plus = plus_decoding::keep);

class request {
public:
    struct header_field {
        std::string_view name;
        std::string_view value;
    };

    class header_iterator;
    class header_range;

    std::string_view method() const noexcept { return view(method_); }
    /// The request-target exactly as received ("/a/b?x=1").
    std::string_view target() const noexcept { return view(target_); }
    /// The path of the target, not decoded: up to '?', and without "http://host" when the
    /// target is in absolute form (RFC 9112 §3.2.2).
    std::string_view path() const noexcept { return view(path_); }
    /// The part after '?', not decoded ("" when absent).
    std::string_view query() const noexcept { return view(query_); }
    /// The first query parameter of that name, percent-decoded ('+' as space); nullopt if absent
    /// or malformed.
    std::optional<std::string> query_param(std::string_view name) const;
    /// A parameter captured by the route template ("/users/{id}"), percent-decoded; nullopt if
    /// the route has no such parameter.
    std::optional<std::string_view> path_param(std::string_view name) const noexcept;

    /// The first header of that name (case-insensitive), nullopt if absent.
    std::optional<std::string_view> header(std::string_view name) const noexcept;
    header_range headers() const noexcept;
    std::size_t header_count() const noexcept { return headers_.size(); }

    std::string_view body() const noexcept { return body_; }
    http_version version() const noexcept { return version_; }
    /// Whether the client asked to keep the connection open (HTTP/1.1 default, or HTTP/1.0 with
    /// "Connection: keep-alive"), before the server's own decision.
    bool keep_alive() const noexcept { return keep_alive_; }
    /// The peer's address as "ip:port" ("[::1]:port" for IPv6).
    const std::string& remote_address() const noexcept { return remote_address_; }
    /// The connection's TLS (version, cipher, SNI name, client certificate); null on a plaintext
    /// connection. Made once per connection at the end of its handshake and shared by its
    /// exchanges; valid as long as this request, on whichever thread the handler runs.
    const tls_info* tls() const noexcept { return tls_.get(); }

    /// Empties the request, keeping its capacity.
    void clear() noexcept;

private:
    friend class detail::request_builder;
    struct slice {
        std::uint32_t off = 0;
        std::uint32_t len = 0;
    };
    std::string_view view(slice s) const noexcept { return {arena_.data() + s.off, s.len}; }

    std::string arena_;
    slice method_;
    slice target_;
    slice path_;
    slice query_;
    std::vector<std::pair<slice, slice>> headers_;
    std::vector<std::pair<std::string_view, slice>> path_params_; // name (router-owned) -> value in params_
    std::string params_;                                          // decoded path parameter values
    std::string body_;
    std::string remote_address_;
    std::shared_ptr<const tls_info> tls_; // the connection's; null for plaintext (no allocation)
    http_version version_;
    bool keep_alive_ = true;
};

class request::header_iterator {
public:
    using value_type = header_field;
    using difference_type = std::ptrdiff_t;
    header_iterator() = default;
    header_iterator(const request* r, std::size_t i) : r_(r), i_(i) {}
    header_field operator*() const noexcept {
        const auto& [n, v] = r_->headers_[i_];
        return {r_->view(n), r_->view(v)};
    }
    header_iterator& operator++() noexcept {
        ++i_;
        return *this;
    }
    header_iterator operator++(int) noexcept {
        auto t = *this;
        ++i_;
        return t;
    }
    friend bool operator==(const header_iterator& a, const header_iterator& b) noexcept {
        return a.i_ == b.i_;
    }

private:
    const request* r_ = nullptr;
    std::size_t i_ = 0;
};

class request::header_range {
public:
    header_range(const request* r) : r_(r) {}
    header_iterator begin() const noexcept { return {r_, 0}; }
    header_iterator end() const noexcept { return {r_, r_->headers_.size()}; }

private:
    const request* r_;
};

inline request::header_range request::headers() const noexcept {
    return {this};
}

} // namespace sluice
