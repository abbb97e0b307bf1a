#include "support/http_response.h"

#include <charconv>
#include <cstdio>

namespace sluice::test {

namespace {

char lower(char c) noexcept {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// A response line must end in CRLF; a bare LF from the server is a bug worth reporting.
std::size_t find_crlf(std::string_view data, std::size_t from) noexcept {
    return data.find("\r\n", from);
}

parse_outcome malformed(std::string why) {
    parse_outcome out;
    out.status = parse_status::malformed;
    out.error = std::move(why);
    return out;
}

bool parse_status_line(std::string_view line, http_response& r, std::string& error) {
    // HTTP-version SP status-code SP [reason-phrase] (RFC 9112 §4)
    const bool shape_ok = line.size() >= 12 && line.substr(0, 5) == "HTTP/" && line[8] == ' ' &&
                          (line.size() == 12 || line[12] == ' ');
    if (!shape_ok) {
        error = "bad status line: " + printable(line);
        return false;
    }
    r.version = std::string(line.substr(0, 8));
    int code = 0;
    const auto digits = line.substr(9, 3);
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), code);
    if (ec != std::errc{} || p != digits.data() + digits.size() || code < 100 || code > 999) {
        error = "bad status code: " + printable(line);
        return false;
    }
    r.status = code;
    r.reason = line.size() > 13 ? std::string(line.substr(13)) : std::string();
    return true;
}

bool parse_size(std::string_view text, int base, std::size_t& out) {
    if (text.empty()) {
        return false;
    }
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return ec == std::errc{} && p == text.data() + text.size();
}

// Parses chunked data starting at `off`; returns the offset past the final CRLF, or 0 when
// more bytes are needed; sets error on garbage.
std::size_t parse_chunked(std::string_view data, std::size_t off, http_response& r, std::string& error) {
    while (true) {
        const std::size_t eol = find_crlf(data, off);
        if (eol == std::string_view::npos) {
            return 0;
        }
        std::string_view size_line = data.substr(off, eol - off);
        if (const auto semi = size_line.find(';'); semi != std::string_view::npos) {
            size_line = size_line.substr(0, semi); // chunk extensions are allowed, ignored
        }
        std::size_t size = 0;
        if (!parse_size(trim(size_line), 16, size)) {
            error = "bad chunk size line: " + printable(data.substr(off, eol - off));
            return 0;
        }
        off = eol + 2;
        if (size == 0) {
            // Trailer section, then an empty line.
            while (true) {
                const std::size_t end = find_crlf(data, off);
                if (end == std::string_view::npos) {
                    return 0;
                }
                const bool empty = end == off;
                off = end + 2;
                if (empty) {
                    return off;
                }
            }
        }
        if (data.size() < off + size + 2) {
            return 0;
        }
        if (data.substr(off + size, 2) != "\r\n") {
            error = "chunk data not followed by CRLF";
            return 0;
        }
        r.chunks.emplace_back(data.substr(off, size));
        r.body.append(data.substr(off, size));
        off += size + 2;
    }
}

} // namespace

bool same_name(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

std::optional<std::string> http_response::header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
        if (same_name(n, name)) {
            return v;
        }
    }
    return std::nullopt;
}

bool http_response::says_close() const {
    const auto c = header("Connection");
    return c && same_name(*c, "close");
}

std::size_t http_response::header_count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& h : headers) {
        if (same_name(h.first, name)) {
            ++n;
        }
    }
    return n;
}

parse_outcome parse_response(std::string_view data, bool eof, body_rule rule) {
    parse_outcome out;
    const std::size_t head_end = data.find("\r\n\r\n");
    if (head_end == std::string_view::npos) {
        if (eof && !data.empty()) {
            return malformed("connection closed inside a response head: " + printable(data));
        }
        return out;
    }
    http_response& r = out.response;
    std::string error;
    const std::size_t line_end = find_crlf(data, 0);
    if (!parse_status_line(data.substr(0, line_end), r, error)) {
        return malformed(error);
    }
    std::size_t off = line_end + 2;
    while (off < head_end + 2) {
        const std::size_t eol = find_crlf(data, off);
        const std::string_view line = data.substr(off, eol - off);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0 || line.find('\n') != std::string_view::npos) {
            return malformed("bad header line: " + printable(line));
        }
        r.headers.emplace_back(std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1))));
        off = eol + 2;
    }
    off = head_end + 4;

    // RFC 9112 §6.3: 1xx, 204, 304 and responses to HEAD end with their head.
    const bool no_body =
        r.is_interim() || r.status == 204 || r.status == 304 || rule == body_rule::head_request;
    if (r.header_count("Content-Length") > 1) {
        return malformed("more than one Content-Length");
    }
    const auto te = r.header("Transfer-Encoding");
    const auto cl = r.header("Content-Length");
    if (te && cl) {
        return malformed("both Transfer-Encoding and Content-Length");
    }
    if (no_body) {
        out.status = parse_status::complete;
        out.consumed = off;
        return out;
    }
    if (te) {
        if (!same_name(*te, "chunked")) {
            return malformed("unexpected Transfer-Encoding: " + *te);
        }
        r.chunked = true;
        const std::size_t end = parse_chunked(data, off, r, error);
        if (!error.empty()) {
            return malformed(error);
        }
        if (end == 0) {
            if (eof) {
                return malformed("connection closed inside a chunked body");
            }
            out.response = {};
            return out;
        }
        out.status = parse_status::complete;
        out.consumed = end;
        return out;
    }
    if (cl) {
        std::size_t len = 0;
        if (!parse_size(*cl, 10, len)) {
            return malformed("bad Content-Length: " + *cl);
        }
        if (data.size() - off < len) {
            if (eof) {
                return malformed("connection closed before the whole Content-Length body");
            }
            out.response = {};
            return out;
        }
        r.body.assign(data.substr(off, len));
        out.status = parse_status::complete;
        out.consumed = off + len;
        return out;
    }
    // Neither: the body runs to the end of the connection.
    if (!eof) {
        out.response = {};
        return out;
    }
    r.body.assign(data.substr(off));
    r.delimited_by_close = true;
    out.status = parse_status::complete;
    out.consumed = data.size();
    return out;
}

std::string printable(std::string_view bytes, std::size_t max) {
    std::string out;
    for (std::size_t i = 0; i < bytes.size() && i < max; ++i) {
        const char c = bytes[i];
        if (c == '\r') {
            out += "\\r";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c >= 0x20 && c < 0x7f) {
            out += c;
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
            out += buf;
        }
    }
    if (bytes.size() > max) {
        out += "...(" + std::to_string(bytes.size()) + " bytes)";
    }
    return out;
}

} // namespace sluice::test
