// The character classes of HTTP's grammar (RFC 9110 §5.6), one definition for the parsers,
// the serializer's checks, the router and the client.
#pragma once

#include <cstddef>
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

/// The authority of an absolute-form request-target ("http://a:8080/x?q" gives "a:8080"), which
/// RFC 9112 §3.2.2 makes the request's host in place of Host; is_absolute is false for any other
/// form.
struct target_authority {
    bool is_absolute = false;
    std::string_view authority;
};
constexpr target_authority absolute_form_authority(std::string_view target) noexcept {
    for (std::string_view scheme : {std::string_view{"http://"}, std::string_view{"https://"}}) {
        if (target.size() < scheme.size()) {
            continue;
        }
        bool same = true;
        for (std::size_t i = 0; i < scheme.size() && same; ++i) {
            const char c = target[i];
            same = (c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) == scheme[i];
        }
        if (same) {
            const std::string_view rest = target.substr(scheme.size());
            return {true, rest.substr(0, rest.find_first_of("/?"))};
        }
    }
    return {};
}

} // namespace sluice::http
