// Response serialization: straight appends into the connection's output buffer, sized once
// up front, with hand-rolled number formatting (no streams, no fmt on this path).
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/server_session.h"

namespace sluice::http {

namespace {

constexpr std::string_view crlf = "\r\n";

// Room for the status line, Date, Content-Length / Transfer-Encoding and Connection lines.
constexpr std::size_t fixed_head_bytes = 160;

int sendable_status(int status) noexcept {
    return (status < 100 || status > 599) ? 500 : status;
}

bool is_http10(const response_framing& f) noexcept {
    return f.version.major == 1 && f.version.minor == 0;
}

// RFC 9110 §2.5: the response carries the highest minor version the server speaks within the
// request's major version, so HTTP/1.1 also answers HTTP/1.0.
void append_status_line(std::string& out, int status) {
    char line[13] = {'H', 'T', 'T', 'P', '/', '1', '.', '1', ' ', '0', '0', '0', ' '};
    line[9] = static_cast<char>('0' + status / 100);
    line[10] = static_cast<char>('0' + status / 10 % 10);
    line[11] = static_cast<char>('0' + status % 10);
    out.append(line, sizeof line);
    out.append(reason_phrase(status));
    out.append(crlf);
}

void append_decimal(std::string& out, std::uint64_t v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    out.append(digits, static_cast<std::size_t>(r.ptr - digits));
}

// Copies the handler's header lines, leaving out the framing ones the server owns:
// Content-Length and Transfer-Encoding (a wrong one would desynchronize the connection,
// RFC 9112 §6) and Connection (the server decides persistence). Runs of kept lines are
// copied at once. Returns whether the handler set its own Date.
bool append_handler_headers(std::string& out, std::string_view headers) {
    bool has_date = false;
    std::size_t run = 0; // start of the current run of kept lines
    std::size_t pos = 0;
    while (pos < headers.size()) {
        const std::size_t colon = headers.find(':', pos);
        const std::size_t end = headers.find('\n', colon) + 1;
        const std::string_view name = headers.substr(pos, colon - pos);
        bool drop = false;
        switch (name.size()) {
        case 4:
            has_date = has_date || iequals(name, "date");
            break;
        case 10:
            drop = iequals(name, "connection");
            break;
        case 14:
            drop = iequals(name, "content-length");
            break;
        case 17:
            drop = iequals(name, "transfer-encoding");
            break;
        default:
            break;
        }
        if (drop) {
            out.append(headers.substr(run, pos - run));
            run = end;
        }
        pos = end;
    }
    out.append(headers.substr(run));
    return has_date;
}

void append_date(std::string& out, std::string_view date) {
    if (!date.empty()) {
        out.append("Date: ");
        out.append(date);
        out.append(crlf);
    }
}

// RFC 9112 §9.3: an HTTP/1.1 connection persists unless "close" is sent; an HTTP/1.0 one
// closes unless "keep-alive" is (RFC 9112 §C.2.2).
void append_connection(std::string& out, const response_framing& f) {
    if (is_http10(f)) {
        if (f.keep_alive) {
            out.append("Connection: keep-alive\r\n");
        }
    } else if (!f.keep_alive) {
        out.append("Connection: close\r\n");
    }
}

} // namespace

// RFC 9110 §6.4.1: 1xx, 204 and 304 responses never have content, so they carry neither a
// body nor (RFC 9110 §8.6) a Content-Length announcing one.
bool status_has_content(int status) noexcept {
    // Of the status as sent: one out of range goes out as 500, which has content.
    status = sendable_status(status);
    return status >= 200 && status != 204 && status != 304;
}

bool stream_ends_by_close(const response_framing& f) noexcept {
    return is_http10(f) && !f.content_length && !f.head_request && !f.no_content;
}

std::string_view continue_response() noexcept {
    return "HTTP/1.1 100 Continue\r\n\r\n";
}

void serialize_response(const response& res, const response_framing& f, std::string_view date,
                        std::string& out) {
    const int status = sendable_status(res.status());
    const bool has_content = status_has_content(status);
    // HEAD (RFC 9110 §9.3.2): the GET headers, Content-Length included, without the content.
    const bool send_body = has_content && !f.head_request;
    out.reserve(out.size() + fixed_head_bytes + res.raw_headers().size() + date.size() +
                (send_body ? res.body().size() : 0));

    append_status_line(out, status);
    if (!append_handler_headers(out, res.raw_headers())) {
        append_date(out, date);
    }
    if (has_content) {
        out.append("Content-Length: ");
        append_decimal(out, res.body().size());
        out.append(crlf);
    }
    append_connection(out, f);
    out.append(crlf);
    if (send_body) {
        out.append(res.body());
    }
}

void serialize_stream_head(const response& res, const response_framing& f, std::string_view date,
                           std::string& out) {
    const int status = sendable_status(res.status());
    out.reserve(out.size() + fixed_head_bytes + res.raw_headers().size() + date.size());

    append_status_line(out, status);
    if (!append_handler_headers(out, res.raw_headers())) {
        append_date(out, date);
    }
    if (f.content_length && status_has_content(status)) {
        // A declared length frames the body in every version (RFC 9112 §6.3 item 6), so an
        // HTTP/1.0 client may keep the connection as for a whole body.
        out.append("Content-Length: ");
        append_decimal(out, *f.content_length);
        out.append(crlf);
        append_connection(out, f);
    } else if (is_http10(f)) {
        // HTTP/1.0 has no chunked coding (RFC 9112 §7): the body runs until the server closes,
        // which is also 1.0's default, so no Connection header is needed. A 204/304 that
        // declared a length ends with its head, so it may keep the connection: it says so.
        if (f.content_length) {
            append_connection(out, f);
        }
    } else {
        if (status_has_content(status)) {
            out.append("Transfer-Encoding: chunked\r\n");
        }
        append_connection(out, f);
    }
    out.append(crlf);
}

void serialize_chunk(std::string_view data, const response_framing& f, std::string& out) {
    // An empty chunk would be the last-chunk and end the stream early (RFC 9112 §7.1). A
    // message without content ends with its head: any byte after it would be read as the
    // start of the next response (RFC 9112 §6.3).
    if (data.empty() || f.head_request || f.no_content) {
        return;
    }
    if (is_http10(f) || f.content_length) {
        out.append(data);
        return;
    }
    char size[24];
    const auto r = std::to_chars(size, size + sizeof size, data.size(), 16);
    out.reserve(out.size() + static_cast<std::size_t>(r.ptr - size) + data.size() + 4);
    out.append(size, static_cast<std::size_t>(r.ptr - size));
    out.append(crlf);
    out.append(data);
    out.append(crlf);
}

void serialize_stream_end(const response_framing& f, std::string& out) {
    if (f.head_request || f.no_content || is_http10(f) || f.content_length) {
        return;
    }
    out.append("0\r\n\r\n"); // last-chunk, no trailers, end of chunked-body (RFC 9112 §7.1)
}

// The request's version does not change the bytes: the status line is HTTP/1.1 either way
// (RFC 9110 §2.5), and "Connection: close" is right for 1.0 and 1.1 alike.
void serialize_error(int status, std::string_view reason, http_version, bool head, std::string_view date,
                     std::string& out) {
    status = sendable_status(status);
    const std::string_view text = reason.empty() ? reason_phrase(status) : reason;
    out.reserve(out.size() + fixed_head_bytes + date.size() + text.size() + 48);

    append_status_line(out, status);
    append_date(out, date);
    if (status_has_content(status)) {
        out.append("Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
        append_decimal(out, text.size() + 1);
        out.append(crlf);
    }
    out.append("Connection: close\r\n\r\n");
    if (status_has_content(status) && !head) {
        out.append(text);
        out.push_back('\n');
    }
}

} // namespace sluice::http
