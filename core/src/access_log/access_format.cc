#include "access_log/access_format.h"

#include <fmt/format.h>

#include <array>
#include <ctime>

namespace sluice::detail {

namespace {

constexpr std::string_view hex = "0123456789ABCDEF";

// Combined format: quoted fields are escaped so that a request cannot forge a log line or
// break the quoting (the log injection that nginx fixed by escaping in 1.1.6).
bool needs_escape(unsigned char c) noexcept {
    return c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
}

void append_escaped(std::string& out, std::string_view v) {
    // Runs of plain bytes in one append: a line is formatted per request, on the loop.
    std::size_t run = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (!needs_escape(c)) {
            continue;
        }
        out.append(v.data() + run, i - run);
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 0xf];
        run = i + 1;
    }
    out.append(v.data() + run, v.size() - run);
}

void append_dash_or(std::string& out, std::string_view v) {
    if (v.empty()) {
        out += '-';
    } else {
        append_escaped(out, v);
    }
}

void append_json_string(std::string& out, std::string_view v) {
    out += '"';
    for (const char ch : v) {
        const auto c = static_cast<unsigned char>(ch);
        if (ch == '"' || ch == '\\') {
            out += '\\';
            out += ch;
        } else if (c < 0x20 || c >= 0x7f) {
            // Bytes above 0x7f are escaped one by one: the header bytes need not be UTF-8, and
            // the line must stay valid JSON whatever a client sent.
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 0xf];
        } else {
            out += ch;
        }
    }
    out += '"';
}

std::tm utc(std::time_t secs) noexcept {
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    return tm;
}

// The time of a line to the second, formatted once per second per loop thread (and per format):
// gmtime_r and the formatting were a good part of a line's cost at tens of thousands a second.
struct second_cache {
    std::time_t secs = -1;
    std::string text;
};

// Appends `secs` as `write_date` formats it, formatting at most once per second per cache.
template <typename Write>
void append_cached_time(std::string& out, second_cache& cache, std::time_t secs, Write write_date) {
    if (cache.secs != secs) {
        cache.text.clear();
        write_date(cache.text, utc(secs));
        cache.secs = secs;
    }
    out += cache.text;
}

void append_combined_time(std::string& out, std::time_t secs) {
    static constexpr std::array<std::string_view, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    thread_local second_cache cache;
    append_cached_time(out, cache, secs, [](std::string& text, const std::tm& tm) {
        fmt::format_to(std::back_inserter(text), "{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000", tm.tm_mday,
                       months[static_cast<std::size_t>(tm.tm_mon) % 12], tm.tm_year + 1900, tm.tm_hour,
                       tm.tm_min, tm.tm_sec);
    });
}

void append_iso_time(std::string& out, std::time_t secs) {
    thread_local second_cache cache;
    append_cached_time(out, cache, secs, [](std::string& text, const std::tm& tm) {
        fmt::format_to(std::back_inserter(text), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    });
}

std::time_t seconds_of(std::chrono::system_clock::time_point t) noexcept {
    // Floor, not to_time_t's truncation toward zero (the same after 1970).
    return static_cast<std::time_t>(std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count());
}

void append_combined(std::string& out, const access_record& r) {
    append_dash_or(out, address_of(r.remote));
    out += " - - [";
    append_combined_time(out, seconds_of(r.time));
    out += "] \"";
    if (r.method.empty()) {
        out += '-'; // nginx's "-" for a request line that never parsed
    } else {
        append_escaped(out, r.method);
        out += ' ';
        append_escaped(out, r.target);
        fmt::format_to(std::back_inserter(out), " HTTP/{}.{}", r.version.major, r.version.minor);
    }
    fmt::format_to(std::back_inserter(out), "\" {} {} \"", r.status, r.body_bytes);
    append_dash_or(out, r.referer);
    out += "\" \"";
    append_dash_or(out, r.user_agent);
    out += "\"\n";
}

void append_json(std::string& out, const access_record& r) {
    const auto ms = std::chrono::floor<std::chrono::milliseconds>(r.time.time_since_epoch()).count() % 1000;
    out += "{\"time\":\"";
    append_iso_time(out, seconds_of(r.time));
    fmt::format_to(std::back_inserter(out), ".{:03}Z\",\"remote\":", ms);
    append_json_string(out, address_of(r.remote));
    out += ",\"method\":";
    append_json_string(out, r.method);
    out += ",\"target\":";
    append_json_string(out, r.target);
    fmt::format_to(std::back_inserter(out),
                   ",\"protocol\":\"HTTP/{}.{}\",\"status\":{},\"bytes\":{},\"referer\":", r.version.major,
                   r.version.minor, r.status, r.body_bytes);
    append_json_string(out, r.referer);
    out += ",\"user_agent\":";
    append_json_string(out, r.user_agent);
    fmt::format_to(std::back_inserter(out), ",\"duration_s\":{:.6f}}}\n",
                   std::chrono::duration<double>(r.duration).count());
}

} // namespace

std::string_view address_of(std::string_view remote) noexcept {
    if (!remote.empty() && remote.front() == '[') {
        const auto close = remote.find(']');
        return close == std::string_view::npos ? remote : remote.substr(1, close - 1);
    }
    const auto colon = remote.rfind(':');
    return colon == std::string_view::npos ? remote : remote.substr(0, colon);
}

void append_access_line(std::string& out, const access_record& r, access_log_format f) {
    if (f == access_log_format::json) {
        append_json(out, r);
    } else {
        append_combined(out, r);
    }
}

} // namespace sluice::detail
