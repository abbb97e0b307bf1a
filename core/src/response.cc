// Response headers live serialized ("Name: value\r\n" each) in one string: building a
// response is appending, and serializing it is a copy.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <sluice/request.h>
#include <sluice/response.h>

#include "http/tokens.h"

namespace sluice {

namespace {

using http::is_tchar;

/// The header block's first allocation: a few typical fields (Content-Type, Date, a cookie).
constexpr std::size_t typical_header_bytes = 128;

// tchar (RFC 9110 §5.6.2): a header name is one or more of these.
void validate(std::string_view name, std::string_view value) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar)) {
        throw std::invalid_argument("response header name is not an RFC 9110 token");
    }
    // RFC 9110 §5.5: CR, LF and NUL are invalid in a field value; letting them through would
    // let a handler inject header lines or split the response.
    if (value.find_first_of(std::string_view{"\r\n\0", 3}) != std::string_view::npos) {
        throw std::invalid_argument("response header value contains CR, LF or NUL");
    }
}

/// One "Name: value\r\n" line of the serialized headers.
struct header_line {
    std::string_view name;
    std::string_view value;
    std::size_t end = 0; ///< offset just past the line's CRLF
};

// The string only ever holds lines appended by set_header_unchecked, so every line has a
// ':' after a non-empty name, ": " before the value and a CRLF at its end.
header_line line_at(std::string_view headers, std::size_t pos) noexcept {
    const std::size_t colon = headers.find(':', pos);
    const std::size_t eol = headers.find("\r\n", colon);
    return {headers.substr(pos, colon - pos), headers.substr(colon + 2, eol - colon - 2), eol + 2};
}

} // namespace

response& response::header(std::string_view name, std::string_view value) {
    validate(name, value);
    set_header_unchecked(name, value, true);
    return *this;
}

response& response::add_header(std::string_view name, std::string_view value) {
    validate(name, value);
    set_header_unchecked(name, value, false);
    return *this;
}

void response::set_header_unchecked(std::string_view name, std::string_view value, bool replace) {
    if (replace) {
        remove_header(name);
    }
    const std::size_t need = headers_.size() + name.size() + value.size() + 4;
    if (need > headers_.capacity()) {
        // Room for a typical head's fields at the first one, then doubling: one allocation
        // for most responses, not one per field.
        headers_.reserve(std::max({need, typical_header_bytes, 2 * headers_.capacity()}));
    }
    headers_.append(name);
    headers_.append(": ");
    headers_.append(value);
    headers_.append("\r\n");
}

std::size_t response::remove_header(std::string_view name) {
    // Compacts in place: kept lines slide left over removed ones, so no temporary string.
    std::size_t removed = 0;
    std::size_t read = 0;
    std::size_t write = 0;
    while (read < headers_.size()) {
        const header_line line = line_at(headers_, read);
        if (iequals(line.name, name)) {
            ++removed;
        } else {
            if (write != read) {
                std::copy(headers_.begin() + static_cast<std::ptrdiff_t>(read),
                          headers_.begin() + static_cast<std::ptrdiff_t>(line.end),
                          headers_.begin() + static_cast<std::ptrdiff_t>(write));
            }
            write += line.end - read;
        }
        read = line.end;
    }
    headers_.resize(write);
    return removed;
}

std::optional<std::string_view> response::header(std::string_view name) const noexcept {
    std::size_t pos = 0;
    while (pos < headers_.size()) {
        const header_line line = line_at(headers_, pos);
        if (iequals(line.name, name)) {
            return line.value;
        }
        pos = line.end;
    }
    return std::nullopt;
}

response& response::text(std::string b) {
    set_header_unchecked("Content-Type", "text/plain; charset=utf-8", true);
    body_ = std::move(b);
    return *this;
}

response& response::json(std::string b) {
    // RFC 8259 §11: application/json has no charset parameter; JSON text is UTF-8.
    set_header_unchecked("Content-Type", "application/json", true);
    body_ = std::move(b);
    return *this;
}

response& response::html(std::string b) {
    set_header_unchecked("Content-Type", "text/html; charset=utf-8", true);
    body_ = std::move(b);
    return *this;
}

response& response::write(std::string_view chunk) {
    // A body set before the first write() is the first part of the stream: body_ already
    // holds the bytes not sent yet.
    streaming_ = true;
    body_.append(chunk);
    return *this;
}

response& response::content_length(std::uint64_t n) {
    // The framing went out with the head: a length announced now would not match the wire.
    if (head_sent_ && declared_length_ != n) {
        throw std::logic_error("response::content_length() after the stream's head went out");
    }
    declared_length_ = n;
    streaming_ = true;
    return *this;
}

void response::clear() noexcept {
    status_ = 200;
    headers_.clear();
    body_.clear();
    streaming_ = false;
    head_sent_ = false;
    declared_length_.reset();
}

std::string_view reason_phrase(int status) noexcept {
    // RFC 9110 §15, plus the codes of RFC 6585 (428, 429, 431, 511) and RFC 7725 (451).
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 103:
        return "Early Hints";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 203:
        return "Non-Authoritative Information";
    case 204:
        return "No Content";
    case 205:
        return "Reset Content";
    case 206:
        return "Partial Content";
    case 300:
        return "Multiple Choices";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 305:
        return "Use Proxy";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 511:
        return "Network Authentication Required";
    default:
        return "Unknown";
    }
}

} // namespace sluice
