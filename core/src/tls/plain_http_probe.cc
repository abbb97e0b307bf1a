#include "tls/plain_http_probe.h"

#include <charconv>
#include <string>

namespace sluice::detail {

namespace {

// "GET", "PUT" are the shortest; "OPTIONS" (and "CONNECT") the longest methods in use.
constexpr std::size_t min_method = 3;
constexpr std::size_t max_method = max_probe_bytes - 1;

constexpr std::string_view reply_head = "HTTP/1.1 400 Bad Request\r\n"
                                        "Content-Type: text/plain; charset=utf-8\r\n"
                                        "Connection: close\r\n"
                                        "Content-Length: ";
constexpr std::string_view reply_body = "This port speaks HTTPS: send the request over TLS (https://).\n";

} // namespace

plain_probe probe_plain_http(std::string_view first_bytes) noexcept {
    const std::string_view seen = first_bytes.substr(0, max_probe_bytes);
    std::size_t n = 0;
    while (n < seen.size() && may_be_plain_http(seen[n])) {
        ++n;
    }
    if (n == seen.size()) {
        return n <= max_method ? plain_probe::need_more : plain_probe::neither;
    }
    return seen[n] == ' ' && n >= min_method ? plain_probe::request_line : plain_probe::neither;
}

void append_plain_http_reply(std::string& out) {
    char length[20];
    const auto end = std::to_chars(length, length + sizeof length, reply_body.size()).ptr;
    out.append(reply_head);
    out.append(length, end);
    out.append("\r\n\r\n");
    out.append(reply_body);
}

} // namespace sluice::detail
