// Request accessors and the small text helpers of the public API.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/request.h>

namespace sluice {

namespace {

constexpr char ascii_lower(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

} // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) {
            return false;
        }
    }
    return true;
}

// RFC 3986 §2.1: '%' HEXDIG HEXDIG. A '%' not followed by two hex digits is malformed
// rather than literal: guessing would let "%zz" and "%25zz" mean the same thing.
// '+' as space is the application/x-www-form-urlencoded convention (WHATWG URL §5.1),
// used for query strings only.
std::optional<std::string> percent_decode(std::string_view in, plus_decoding plus) {
    std::string out;
    out.reserve(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        const char c = in[i];
        if (c == '%') {
            if (in.size() - i < 3) {
                return std::nullopt;
            }
            const int hi = hex_value(in[i + 1]);
            const int lo = hex_value(in[i + 2]);
            if (hi < 0 || lo < 0) {
                return std::nullopt;
            }
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus == plus_decoding::as_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::optional<std::string> request::query_param(std::string_view name) const {
    std::string_view rest = query();
    while (!rest.empty()) {
        const std::size_t amp = rest.find('&');
        const std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);

        const std::size_t eq = pair.find('=');
        const std::string_view raw_key = pair.substr(0, eq);
        const std::string_view raw_value =
            eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);

        // Keys are compared decoded ("a%5Bb%5D" is "a[b]"), but most keys need no decoding.
        bool match = false;
        if (raw_key.find_first_of("%+") == std::string_view::npos) {
            match = raw_key == name;
        } else {
            const auto key = percent_decode(raw_key, plus_decoding::as_space);
            match = key && *key == name;
        }
        if (match) {
            return percent_decode(raw_value, plus_decoding::as_space);
        }
    }
    return std::nullopt;
}

std::optional<std::string_view> request::path_param(std::string_view name) const noexcept {
    for (const auto& [n, s] : path_params_) {
        if (n == name) {
            return std::string_view{params_.data() + s.off, s.len};
        }
    }
    return std::nullopt;
}

std::optional<std::string_view> request::header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers_) {
        if (iequals(view(n), name)) {
            return view(v);
        }
    }
    return std::nullopt;
}

void request::clear() noexcept {
    // std::string::clear and std::vector::clear keep their capacity, which is the point:
    // a recycled request parses the next one without allocating.
    arena_.clear();
    method_ = {};
    target_ = {};
    path_ = {};
    query_ = {};
    headers_.clear();
    path_params_.clear();
    params_.clear();
    body_.clear();
    remote_address_.clear();
    tls_.reset(); // a recycled request may serve a plaintext connection next
    version_ = {};
    keep_alive_ = true;
}

} // namespace sluice
