#include "options.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace sluice::load {

const char* const usage_text = R"(usage: sluice-load [options] URL   (http:// or https://)
A closed-loop load generator: each user sends a request, waits for its response, sends the next.
  --users N            concurrent users (one connection each)                [1]
  --ramp-up S          start the users evenly over S seconds                 [0]
  --loops L            requests per user (the run ends when all are done)
  --duration S         run for S seconds (with or instead of --loops)
  --window A:B         the steady window for throughput, in seconds from the start
                       [ramp-up + 1 : end - 1]
  -X, --method M       [GET]
  -H, --header 'N: V'  a request header (repeatable)
  --body-file F        the request body, read from F
  --upload F           a multipart/form-data upload of file F (method POST unless -X)
  --upload-field NAME  the form field of --upload                            [file]
  --timeout S          per-request response timeout                          [30]
  --connect-timeout S  per-connect timeout                                   [2]
  --no-keep-alive      one request per connection (with https: a full handshake each)
  --cacert FILE        https: trust the CAs in FILE instead of the system's
  -k, --insecure       https: do not verify the server's certificate
  --json | --csv       machine-readable summary on stdout
  --no-progress        no progress line on stderr
  --label NAME         the label of the summary row
One fd per user: raise `ulimit -n` above --users (10,000 users need more than 10,000 fds).
)";

namespace {

double parse_number(std::string_view flag, std::string_view v) {
    double d = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
    if (ec != std::errc{} || p != v.data() + v.size() || !std::isfinite(d) || d < 0) {
        throw std::invalid_argument(std::string(flag) + ": not a non-negative number: '" + std::string(v) +
                                    "'");
    }
    return d;
}

std::uint64_t parse_count(std::string_view flag, std::string_view v) {
    std::uint64_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || p != v.data() + v.size()) {
        throw std::invalid_argument(std::string(flag) + ": not a whole number: '" + std::string(v) + "'");
    }
    return n;
}

std::chrono::milliseconds parse_seconds(std::string_view flag, std::string_view v) {
    double s = parse_number(flag, v);
    if (s <= 0 || s > 86400) {
        throw std::invalid_argument(std::string(flag) + ": must be in (0, 86400] seconds");
    }
    return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(s * 1000)));
}

header_field parse_header(std::string_view v) {
    auto colon = v.find(':');
    if (colon == std::string_view::npos || colon == 0) {
        throw std::invalid_argument("--header: expected 'Name: value', got '" + std::string(v) + "'");
    }
    std::string_view value = v.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
        value.remove_prefix(1);
    }
    return {std::string(v.substr(0, colon)), std::string(value)};
}

} // namespace

void parse_url(std::string_view url, std::string& host, std::string& target, bool& tls) {
    constexpr std::string_view http = "http://";
    constexpr std::string_view https = "https://";
    if (url.substr(0, http.size()) == http) {
        tls = false;
        url.remove_prefix(http.size());
    } else if (url.substr(0, https.size()) == https) {
        tls = true;
        url.remove_prefix(https.size());
    } else {
        throw std::invalid_argument("URL: only http:// and https:// URLs are supported: '" +
                                    std::string(url) + "'");
    }
    auto slash = url.find('/');
    std::string_view authority = url.substr(0, slash);
    target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
    if (authority.empty()) {
        throw std::invalid_argument("URL: no host");
    }
    // A port is present when the last ':' is after the closing bracket of an IPv6 literal.
    auto colon = authority.rfind(':');
    auto bracket = authority.rfind(']');
    bool has_port = colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket);
    host = has_port ? std::string(authority) : std::string(authority) + (tls ? ":443" : ":80");
}

load_options parse_options(const std::vector<std::string_view>& args) {
    load_options o;
    std::string url;
    bool method_set = false;
    bool window_set = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        auto value = [&]() -> std::string_view {
            if (i + 1 >= args.size()) {
                throw std::invalid_argument(std::string(a) + ": needs a value");
            }
            return args[++i];
        };
        if (a == "--users") {
            o.users = parse_count(a, value());
        } else if (a == "--ramp-up") {
            o.ramp_up_s = parse_number(a, value());
        } else if (a == "--loops") {
            o.loops = parse_count(a, value());
        } else if (a == "--duration") {
            o.duration_s = parse_number(a, value());
        } else if (a == "--window") {
            std::string_view w = value();
            auto c = w.find(':');
            if (c == std::string_view::npos) {
                throw std::invalid_argument("--window: expected START:END seconds");
            }
            o.window_start_s = parse_number(a, w.substr(0, c));
            o.window_end_s = parse_number(a, w.substr(c + 1));
            window_set = true;
        } else if (a == "-X" || a == "--method") {
            o.method = std::string(value());
            method_set = true;
        } else if (a == "-H" || a == "--header") {
            o.headers.push_back(parse_header(value()));
        } else if (a == "--body-file") {
            o.body_file = std::string(value());
        } else if (a == "--upload") {
            o.upload_file = std::string(value());
        } else if (a == "--upload-field") {
            o.upload_field = std::string(value());
        } else if (a == "--timeout") {
            o.timeout = parse_seconds(a, value());
        } else if (a == "--connect-timeout") {
            o.connect_timeout = parse_seconds(a, value());
        } else if (a == "--cacert") {
            o.ca_file = std::string(value());
        } else if (a == "--insecure" || a == "-k") {
            o.insecure = true;
        } else if (a == "--no-keep-alive") {
            o.keep_alive = false;
        } else if (a == "--json") {
            o.format = output_format::json;
        } else if (a == "--csv") {
            o.format = output_format::csv;
        } else if (a == "--no-progress") {
            o.progress = false;
        } else if (a == "--label") {
            o.label = std::string(value());
        } else if (!a.empty() && a.front() == '-') {
            throw std::invalid_argument("unknown option '" + std::string(a) + "'");
        } else if (url.empty()) {
            url = std::string(a);
        } else {
            throw std::invalid_argument("more than one URL: '" + std::string(a) + "'");
        }
    }
    if (url.empty()) {
        throw std::invalid_argument("no URL");
    }
    parse_url(url, o.host, o.target, o.tls);
    if (!o.tls && (!o.ca_file.empty() || o.insecure)) {
        throw std::invalid_argument("--cacert and --insecure need an https:// URL");
    }
    if (!o.ca_file.empty() && o.insecure) {
        throw std::invalid_argument("--cacert and --insecure exclude each other");
    }
    if (o.users == 0) {
        throw std::invalid_argument("--users: at least 1");
    }
    if (o.loops == 0 && o.duration_s <= 0) {
        throw std::invalid_argument("give --loops or --duration (or both)");
    }
    if (o.duration_s > 0 && o.ramp_up_s >= o.duration_s) {
        throw std::invalid_argument("--ramp-up must be shorter than --duration");
    }
    if (!o.body_file.empty() && !o.upload_file.empty()) {
        throw std::invalid_argument("--body-file and --upload exclude each other");
    }
    if (!o.upload_file.empty() && !method_set) {
        o.method = "POST";
    }
    if (window_set && o.window_end_s <= o.window_start_s) {
        throw std::invalid_argument("--window: END must be after START");
    }
    if (o.label.empty()) {
        o.label = o.method + (o.tls ? " https://" : " http://") + o.host + o.target;
    }
    return o;
}

} // namespace sluice::load
