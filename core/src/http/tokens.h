// The character classes of HTTP's grammar (RFC 9110 §5.6), one definition for the parsers,
// the serializer's checks, the router and the client.
#pragma once

#include <string_view>

namespace sluice::http {

/// tchar: a character of a token (a method, a header name).
constexpr bool is_tchar(char c) noexcept {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
        return true;
    }
    return std::string_view{"!#$%&'*+-.^_`|~"}.find(c) != std::string_view::npos;
}

/// OWS: optional whitespace, a space or a horizontal tab.
constexpr bool is_ows(char c) noexcept {
    return c == ' ' || c == '\t';
}

/// s without its leading and trailing OWS.
constexpr std::string_view trim_ows(std::string_view s) noexcept {
    while (!s.empty() && is_ows(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && is_ows(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

} // namespace sluice::http
