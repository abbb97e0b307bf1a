// The table of configuration keys and everything that only needs the table: setting a
// key from text, validation, the environment, describe_config(). The TOML file is read in
// config_file.cc and the command line in command_line.cc, both through this table.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/config.h>
#include <sluice/error.h>
#include <sluice/log.h>

#include "config_keys.h"
#include "server/socket_util.h"

namespace sluice {
namespace {

using detail::key_spec;
using detail::value_type;

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;
constexpr std::uint64_t gib = 1024 * mib;
// A day: longer than any timeout a server should wait on, short of uint32 overflow (49 days).
constexpr std::uint64_t max_timeout_ms = 24ULL * 60 * 60 * 1000;

/// Quotes a user's value for an error message, escaping what a terminal would eat.
std::string quoted(std::string_view text) {
    constexpr std::size_t max_shown = 80;
    std::string out = "'";
    for (std::size_t i = 0; i < text.size() && i < max_shown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c == 0x7f) {
            constexpr std::string_view hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0xf];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (text.size() > max_shown) {
        out += "...";
    }
    out += "'";
    return out;
}

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}
bool is_alpha(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// --- listen ------------------------------------------------------------------------------

// RFC 1123 host name: dot-separated labels of letters, digits and '-', 1..63 characters each,
// no label starting or ending with '-', 253 characters in all.
bool is_host_name(std::string_view host) noexcept {
    if (host.empty() || host.size() > 253) {
        return false;
    }
    std::size_t start = 0;
    while (start <= host.size()) {
        const std::size_t dot = std::min(host.find('.', start), host.size());
        const std::string_view label = host.substr(start, dot - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
            return false;
        }
        for (const char c : label) {
            if (!is_alpha(c) && !is_digit(c) && c != '-') {
                return false;
            }
        }
        start = dot + 1;
    }
    return true;
}

// inet_pton wants a terminated string; the longest IPv6 text form is 45 characters.
bool is_address(int family, std::string_view host) {
    std::array<char, 64> buf{};
    if (host.empty() || host.size() >= buf.size()) {
        return false;
    }
    std::copy(host.begin(), host.end(), buf.begin());
    std::array<unsigned char, sizeof(in6_addr)> addr{};
    return inet_pton(family, buf.data(), addr.data()) == 1;
}

/// Parses a listen value into out; returns why it is bad, or "".
std::string parse_listen_into(std::string_view text, listen_address& out) {
    const std::string forms = "expected 'host:port', '[ipv6]:port' or ':port'";
    if (text.empty()) {
        return forms + ", got ''";
    }
    std::string_view host;
    std::string_view port;
    if (text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) {
            return "unbalanced '[' in " + quoted(text) + "; " + forms;
        }
        host = text.substr(1, close - 1);
        const std::string_view after = text.substr(close + 1);
        if (after.empty() || after.front() != ':') {
            return "missing ':port' after ']' in " + quoted(text);
        }
        port = after.substr(1);
        if (!is_address(AF_INET6, host)) {
            return quoted(host) + " is not an IPv6 address (in " + quoted(text) + ")";
        }
        out.ipv6 = true;
    } else {
        const std::size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            return "missing ':port' in " + quoted(text) + "; " + forms;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) {
            return "an IPv6 address needs brackets, as in '[::1]:8080' (got " + quoted(text) + ")";
        }
        const bool looks_ipv4 = !host.empty() && std::all_of(host.begin(), host.end(),
                                                             [](char c) { return is_digit(c) || c == '.'; });
        if (looks_ipv4 && !is_address(AF_INET, host)) {
            return quoted(host) + " is not an IPv4 address (in " + quoted(text) + ")";
        }
        if (!looks_ipv4 && !host.empty() && !is_host_name(host)) {
            return quoted(host) + " is not a host name or address (in " + quoted(text) + ")";
        }
        out.ipv6 = false;
    }
    if (port.empty()) {
        return "missing port number in " + quoted(text);
    }
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (!is_digit(port.front()) || ec != std::errc{} || end != port.data() + port.size() || value > 65535) {
        return "port must be a number from 0 to 65535 (got " + quoted(port) + ")";
    }
    out.host = std::string(host);
    out.port = static_cast<std::uint16_t>(value);
    return {};
}

// --- the text keys -----------------------------------------------------------------------

std::string check_backend(std::string_view v) {
    // Any identifier: which names exist is the registry's business, checked at start().
    const bool ok = !v.empty() && v.size() <= 64 && is_alpha(v.front()) &&
                    std::all_of(v.begin(), v.end(),
                                [](char c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '-'; });
    if (!ok) {
        return "must be a backend name (a letter, then letters, digits, '_' or '-'), got " + quoted(v);
    }
    return {};
}

std::string check_listen(std::string_view v) {
    listen_address ignored;
    return parse_listen_into(v, ignored);
}

std::string check_optional_listen(std::string_view v) {
    return v.empty() ? std::string() : check_listen(v);
}

std::string check_access_log_format(std::string_view v) {
    if (v == "combined" || v == "json") {
        return {};
    }
    return "must be 'combined' or 'json', got " + quoted(v);
}

// RFC 3629 UTF-8 (no overlong forms, no surrogates, at most U+10FFFF): what a TOML string holds.
bool is_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = 1;
        std::uint32_t cp = c;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1FU;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0FU;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07U;
        } else if (c >= 0x80) {
            return false;
        }
        if (s.size() - i < len) {
            return false;
        }
        for (std::size_t k = 1; k < len; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0U) != 0x80U) {
                return false;
            }
            cp = (cp << 6U) | (cc & 0x3FU);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return false;
        }
        i += len;
    }
    return true;
}

// An empty path means "not set"; control characters are never part of a file name anyone meant.
// It must be UTF-8 even from the environment or the command line, where any bytes arrive: a
// TOML file cannot hold anything else, so describe_config() could not print it as one.
std::string check_path(std::string_view v) {
    if (std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        return "must be a file path without control characters, got " + quoted(v);
    }
    if (!is_utf8(v)) {
        return "must be UTF-8 (as in a TOML file), got " + quoted(v);
    }
    return {};
}

std::string check_tls_version(std::string_view v) {
    if (v != "1.2" && v != "1.3") {
        return "must be '1.2' or '1.3', got " + quoted(v);
    }
    return {};
}

// OpenSSL cipher strings are ASCII names, ':' '+' '-' '!' and '@'; anything else is a typo
// (OpenSSL itself reports the unusable ones when the server starts).
std::string check_cipher_list(std::string_view v) {
    if (std::any_of(v.begin(), v.end(), [](char c) { return c <= 0x20 || c >= 0x7f; })) {
        return "must be an OpenSSL cipher list (printable ASCII, no spaces), got " + quoted(v);
    }
    return {};
}

std::string check_socket_path(std::string_view v) {
    if (std::string why = check_path(v); !why.empty()) {
        return why;
    }
    // sockaddr_un.sun_path holds 108 bytes with the terminating NUL (unix(7)).
    if (v.size() > 107) {
        return "must be a Unix socket path of at most 107 bytes, got " + std::to_string(v.size());
    }
    return {};
}

std::string store_dispatch(config& c, std::string_view v) {
    if (v == "inline") {
        c.dispatch = dispatch_mode::inline_io;
    } else if (v == "pool") {
        c.dispatch = dispatch_mode::pool;
    } else {
        return "must be 'inline' or 'pool', got " + quoted(v);
    }
    return {};
}

std::string load_dispatch(const config& c) {
    switch (c.dispatch) {
    case dispatch_mode::inline_io:
        return "inline";
    case dispatch_mode::pool:
        return "pool";
    }
    return "?"; // not a dispatch_mode: validate_config reports it
}

std::string store_verify_client(config& c, std::string_view v) {
    if (v == "off") {
        c.tls.verify_client = tls_verify_client::off;
    } else if (v == "optional") {
        c.tls.verify_client = tls_verify_client::optional;
    } else if (v == "require") {
        c.tls.verify_client = tls_verify_client::require;
    } else {
        return "must be 'off', 'optional' or 'require', got " + quoted(v);
    }
    return {};
}

std::string load_verify_client(const config& c) {
    switch (c.tls.verify_client) {
    case tls_verify_client::off:
        return "off";
    case tls_verify_client::optional:
        return "optional";
    case tls_verify_client::require:
        return "require";
    }
    return "?"; // not a tls_verify_client: validate_config reports it
}

// A TOML boolean reaches a text key as "true" / "false" (config_file.cc); so does --set.
std::string store_ktls(config& c, std::string_view v) {
    if (v == "true") {
        c.tls.ktls = true;
    } else if (v == "false") {
        c.tls.ktls = false;
    } else {
        return "must be true or false, got " + quoted(v);
    }
    return {};
}

std::string load_ktls(const config& c) {
    return c.tls.ktls ? "true" : "false";
}

constexpr std::array all_log_levels{log_level::error, log_level::warn, log_level::info, log_level::debug};

std::string store_log_level(config& c, std::string_view v) {
    for (const log_level l : all_log_levels) {
        if (v == to_string(l)) {
            c.log = l;
            return {};
        }
    }
    return "must be one of error, warn, info, debug, got " + quoted(v);
}

std::string load_log_level(const config& c) {
    return std::string(to_string(c.log));
}

// --- the table -----------------------------------------------------------------------------

// The field a path of member pointers leads to: field_at<&config::limits, &limits_config::x>(cfg).
template <auto First, auto... Rest>
constexpr auto& field_at(auto& object) {
    if constexpr (sizeof...(Rest) == 0) {
        return object.*First;
    } else {
        return field_at<Rest...>(object.*First);
    }
}

template <auto... Path>
constexpr std::uint64_t field_max() {
    using field = std::remove_cvref_t<decltype(field_at<Path...>(std::declval<config&>()))>;
    return std::numeric_limits<field>::max();
}

// Integer keys: the field is reached through a path of member pointers, its width checked here.
template <auto... Path>
constexpr key_spec integer_key(std::string_view name, std::uint64_t min, std::uint64_t max,
                               std::string_view help) {
    key_spec k;
    k.name = name;
    k.type = value_type::integer;
    k.min = min;
    k.max = max;
    k.value_hint = "N";
    k.help = help;
    if (max > field_max<Path...>()) {
        throw std::logic_error("a key's range is wider than its field"); // fails the constexpr table
    }
    k.store_integer = [](config& c, std::uint64_t v) {
        auto& field = field_at<Path...>(c);
        field = static_cast<std::remove_reference_t<decltype(field)>>(v);
    };
    k.load_integer = [](const config& c) -> std::uint64_t { return field_at<Path...>(c); };
    return k;
}

template <std::string (*Check)(std::string_view), auto... Path>
constexpr key_spec string_key(std::string_view name, std::string_view hint, std::string_view help) {
    key_spec k;
    k.name = name;
    k.type = value_type::text;
    k.value_hint = hint;
    k.help = help;
    k.store_text = [](config& c, std::string_view v) {
        std::string why = Check(v);
        if (why.empty()) {
            field_at<Path...>(c) = std::string(v);
        }
        return why;
    };
    k.load_text = [](const config& c) { return std::string(field_at<Path...>(c)); };
    return k;
}

constexpr key_spec enum_key(std::string_view name, std::string_view hint, std::string_view help,
                            std::string (*store)(config&, std::string_view),
                            std::string (*load)(const config&)) {
    key_spec k;
    k.name = name;
    k.type = value_type::text;
    k.value_hint = hint;
    k.help = help;
    k.store_text = store;
    k.load_text = load;
    return k;
}

// Zero is allowed only where it has a meaning of its own (watchdog_ms: off; shutdown_timeout_ms:
// end requests in progress at once; shutdown_delay_ms: close the listeners at once; accept_queue: no
// queue; max_body_bytes: no body; max_keepalive_requests: unlimited). Every other timeout is at
// least 1 ms: a zero timeout would fire at once, and "never" is not a safe default for a server.
constexpr std::array keys{
    string_key<check_backend, &config::backend>(
        "backend", "NAME", "I/O backend: a registered name (blocking, epoll, uring) or auto"),
    string_key<check_listen, &config::listen>("listen", "HOST:PORT",
                                              "address to listen on: host:port, [ipv6]:port or :port (all)"),
    integer_key<&config::io_threads>("io_threads", 1, 256, "event loops (reactor backends)"),
    enum_key("dispatch", "inline|pool", "where handlers run: on the I/O thread or on the worker pool",
             store_dispatch, load_dispatch),
    integer_key<&config::worker_threads>("worker_threads", 1, 4096, "worker pool size for dispatch = pool"),
    integer_key<&config::async_timeout_ms>("async_timeout_ms", 1, max_timeout_ms,
                                           "default start_async() timeout"),
    integer_key<&config::watchdog_ms>("watchdog_ms", 0, max_timeout_ms,
                                      "log a loop iteration longer than this; 0 = off"),
    integer_key<&config::shutdown_timeout_ms>("shutdown_timeout_ms", 0, max_timeout_ms,
                                              "on stop, time for requests in progress to finish; 0 = none"),
    integer_key<&config::shutdown_delay_ms>(
        "shutdown_delay_ms", 0, max_timeout_ms,
        "on stop, keep serving this long with /readyz at 503 before the listeners close; 0 = none"),
    string_key<check_socket_path, &config::handover_socket>(
        "handover_socket", "PATH", "Unix socket over which a restart hands the listeners over; empty = off"),
    enum_key("log_level", "error|warn|info|debug", "log verbosity", store_log_level, load_log_level),
    integer_key<&config::blocking, &blocking_config::threads>("blocking.threads", 1, 20'000,
                                                              "blocking backend: connection threads"),
    integer_key<&config::blocking, &blocking_config::accept_queue>(
        "blocking.accept_queue", 0, 1'000'000,
        "blocking backend: connections waiting for a thread; 0 = none wait (closed at once when all busy)"),
    integer_key<&config::limits, &limits_config::max_header_bytes>(
        "limits.max_header_bytes", 256, mib,
        "request line + headers (and a chunked body's trailers); more -> 431"),
    integer_key<&config::limits, &limits_config::max_body_bytes>("limits.max_body_bytes", 0, gib,
                                                                 "request body; more -> 413; 0 = no body"),
    integer_key<&config::limits, &limits_config::header_timeout_ms>(
        "limits.header_timeout_ms", 1, max_timeout_ms, "first byte to end of head; then 408"),
    integer_key<&config::limits, &limits_config::body_timeout_ms>("limits.body_timeout_ms", 1, max_timeout_ms,
                                                                  "end of head to end of body; then 408"),
    integer_key<&config::limits, &limits_config::idle_timeout_ms>("limits.idle_timeout_ms", 1, max_timeout_ms,
                                                                  "keep-alive wait for the next request"),
    integer_key<&config::limits, &limits_config::write_timeout_ms>(
        "limits.write_timeout_ms", 1, max_timeout_ms,
        "time to send what is queued (plus the rate allowance)"),
    integer_key<&config::limits, &limits_config::min_send_rate>(
        "limits.min_send_rate", 0, gib, "bytes/s a client must read: extends the write timeout; 0 = none"),
    integer_key<&config::limits, &limits_config::lingering_timeout_ms>(
        "limits.lingering_timeout_ms", 0, max_timeout_ms,
        "after a last response with input unread: read and drop it this long before closing; 0 = close at "
        "once"),
    integer_key<&config::limits, &limits_config::max_connections>("limits.max_connections", 1, 1'000'000,
                                                                  "open connections per server"),
    integer_key<&config::limits, &limits_config::max_keepalive_requests>(
        "limits.max_keepalive_requests", 0, std::numeric_limits<std::uint32_t>::max(),
        "requests per connection; 0 = unlimited"),
    string_key<check_path, &config::tls, &tls_config::cert>("tls.cert", "FILE",
                                                            "PEM certificate chain; set with tls.key"),
    string_key<check_path, &config::tls, &tls_config::key>("tls.key", "FILE",
                                                           "PEM private key; set with tls.cert"),
    string_key<check_optional_listen, &config::admin, &admin_config::listen>(
        "admin.listen", "HOST:PORT", "admin listener (/metrics, /healthz, /readyz); empty = off"),
    string_key<check_path, &config::access_log, &access_log_config::path>(
        "access_log.path", "FILE", "access log file; - = stdout; empty = off"),
    string_key<check_access_log_format, &config::access_log, &access_log_config::format>(
        "access_log.format", "combined|json", "access log line format"),
    integer_key<&config::access_log, &access_log_config::queue_lines>(
        "access_log.queue_lines", 64, 16 * mib, "access log lines queued before lines are dropped"),
    string_key<check_tls_version, &config::tls, &tls_config::min_version>("tls.min_version", "1.2|1.3",
                                                                          "oldest TLS version accepted"),
    string_key<check_cipher_list, &config::tls, &tls_config::ciphers>(
        "tls.ciphers", "LIST", "TLS 1.2 cipher list; empty = ECDHE with AEAD only"),
    string_key<check_cipher_list, &config::tls, &tls_config::ciphersuites>(
        "tls.ciphersuites", "LIST", "TLS 1.3 suites; empty = OpenSSL's default"),
    integer_key<&config::tls, &tls_config::handshake_timeout_ms>(
        "tls.handshake_timeout_ms", 1, max_timeout_ms, "accept to end of the TLS handshake; then close"),
    string_key<check_path, &config::tls, &tls_config::client_ca>(
        "tls.client_ca", "FILE",
        "PEM CAs that client certificates must chain to; set with tls.verify_client"),
    enum_key("tls.verify_client", "off|optional|require",
             "ask for a client certificate: never, optional, or refuse clients without a good one",
             store_verify_client, load_verify_client),
    enum_key("tls.ktls", "true|false", "kernel TLS when the kernel and OpenSSL offer it (probed at start)",
             store_ktls, load_ktls),
    string_key<check_optional_listen, &config::tls, &tls_config::listen>(
        "tls.listen", "HOST:PORT",
        "a second listener speaking TLS while listen stays plaintext; empty = off"),
};

std::string range_text(const key_spec& k) {
    if (k.min == 0) {
        return "must be at most " + std::to_string(k.max);
    }
    return "must be between " + std::to_string(k.min) + " and " + std::to_string(k.max);
}

[[noreturn]] void fail(const key_spec& k, std::string why, std::string_view where) {
    if (!where.empty()) {
        why += " (";
        why += where;
        why += ")";
    }
    throw startup_error(std::string(k.name), why);
}

void store_checked(config& cfg, const key_spec& k, std::uint64_t value, std::string_view where) {
    if (value < k.min || value > k.max) {
        fail(k, range_text(k) + ", got " + std::to_string(value), where);
    }
    k.store_integer(cfg, value);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0U : 1U)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string toml_string(std::string_view s) {
    std::string out = "\"";
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\r':
            out += "\\r";
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                constexpr std::string_view hex = "0123456789ABCDEF";
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 0xf];
            } else {
                out += ch;
            }
        }
    }
    out += '"';
    return out;
}

} // namespace

namespace detail {

std::span<const key_spec> config_keys() noexcept {
    return keys;
}

const key_spec* find_config_key(std::string_view name) noexcept {
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const key_spec& k) { return k.name == name; });
    return it == keys.end() ? nullptr : &*it;
}

bool is_config_table(std::string_view name) noexcept {
    return std::any_of(keys.begin(), keys.end(), [&](const key_spec& k) {
        return k.name.size() > name.size() && k.name.starts_with(name) && k.name[name.size()] == '.';
    });
}

std::string env_name(std::string_view key) {
    std::string out = "SLUICE_";
    for (const char c : key) {
        out += c == '.' ? '_' : static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    }
    return out;
}

std::string did_you_mean(std::string_view name, std::span<const std::string_view> candidates) {
    // Close enough to be a typo, not so loose that every short name suggests something.
    const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, name.size() / 3));
    std::string_view best;
    std::size_t best_distance = limit + 1;
    for (const std::string_view c : candidates) {
        const std::size_t d = edit_distance(name, c);
        if (d < best_distance) {
            best = c;
            best_distance = d;
        }
    }
    return best.empty() ? std::string() : " (did you mean '" + std::string(best) + "'?)";
}

std::string did_you_mean_key(std::string_view name) {
    std::array<std::string_view, keys.size()> names;
    std::transform(keys.begin(), keys.end(), names.begin(), [](const key_spec& k) { return k.name; });
    return did_you_mean(name, names);
}

void set_from_integer(config& cfg, const key_spec& key, std::int64_t value, std::string_view where) {
    if (key.type != value_type::integer) {
        fail(key, "expected a string, got the integer " + std::to_string(value), where);
    }
    if (value < 0) {
        fail(key, "must not be negative, got " + std::to_string(value), where);
    }
    store_checked(cfg, key, static_cast<std::uint64_t>(value), where);
}

void set_from_text(config& cfg, const key_spec& key, std::string_view value, std::string_view where) {
    if (key.type == value_type::text) {
        std::string why = key.store_text(cfg, value);
        if (!why.empty()) {
            fail(key, std::move(why), where);
        }
        return;
    }
    // Strict: digits only. No sign, no spaces, no suffix: "12abc" and " 12" are mistakes to report.
    if (value.starts_with('-') && value.size() > 1 && is_digit(value[1])) {
        fail(key, "must not be negative, got " + quoted(value), where);
    }
    std::uint64_t number = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (value.empty() || !is_digit(value.front()) || ec == std::errc::invalid_argument) {
        fail(key, "expected a non-negative integer, got " + quoted(value), where);
    }
    if (ec == std::errc::result_out_of_range) {
        fail(key, range_text(key) + ", got " + quoted(value), where);
    }
    if (end != value.data() + value.size()) {
        fail(key,
             "unexpected " + quoted(value.substr(static_cast<std::size_t>(end - value.data()))) +
                 " after the number in " + quoted(value),
             where);
    }
    store_checked(cfg, key, number, where);
}

std::string toml_value(const config& cfg, const key_spec& key) {
    if (key.type == value_type::integer) {
        return std::to_string(key.load_integer(cfg));
    }
    return toml_string(key.load_text(cfg));
}

std::string text_value(const config& cfg, const key_spec& key) {
    if (key.type == value_type::integer) {
        return std::to_string(key.load_integer(cfg));
    }
    return key.load_text(cfg);
}

std::string check_sni_name(std::string_view name) {
    // A DNS name (RFC 1123 labels: 1 to 63 letters, digits and '-', neither first nor last),
    // optionally "*." and one label's worth of wildcard. SNI never carries an IP address (RFC
    // 6066 section 3), so a literal address, whose last label is all digits, could never match.
    std::string_view rest = name;
    if (rest.starts_with("*.")) {
        rest.remove_prefix(2);
    }
    bool ok = !rest.empty() && rest.size() <= 253;
    std::string_view last;
    while (ok && !rest.empty()) {
        const std::size_t dot = rest.find('.');
        const std::string_view label = rest.substr(0, dot);
        rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
        ok =
            !label.empty() && label.size() <= 63 && label.front() != '-' && label.back() != '-' &&
            (dot == std::string_view::npos || !rest.empty()) &&
            std::all_of(label.begin(), label.end(), [](char c) {
                return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
            });
        last = label;
    }
    if (!ok) {
        return "must be a host name (labels of 1 to 63 letters, digits and '-', not first or last; "
               "optionally '*.' first), got " +
               quoted(name);
    }
    if (std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return "must be a host name, not an IP address (SNI never carries one), got " + quoted(name);
    }
    return {};
}

} // namespace detail

namespace {

void validate_tls_extras(const tls_config& tls) {
    // Client certificates need the CAs that vouch for them, and a CA file without a mode would be
    // silently unused: both halves or neither.
    if (tls.verify_client != tls_verify_client::off && tls.client_ca.empty()) {
        throw startup_error("tls.client_ca", "must be set when tls.verify_client is optional or require");
    }
    if (tls.verify_client == tls_verify_client::off && !tls.client_ca.empty()) {
        throw startup_error("tls.verify_client", "must be optional or require when tls.client_ca is set");
    }
    // Without tls.cert nothing speaks TLS: a tls.* key set alone would be silently unused while
    // the server serves plaintext. (tls.key and tls.listen have checks of their own.) Not
    // tls.min_version nor tls.handshake_timeout_ms: always set, to their defaults or not, and code
    // that builds one config for a server with TLS and one without may well set them in both.
    if (tls.cert.empty()) {
        const std::pair<bool, const char*> shaping[] = {
            {!tls.sni.empty(), "tls.sni"},
            {!tls.client_ca.empty(), "tls.client_ca"},
            {tls.ktls, "tls.ktls"},
            {!tls.ciphers.empty(), "tls.ciphers"},
            {!tls.ciphersuites.empty(), "tls.ciphersuites"},
        };
        for (const auto& [set, key] : shaping) {
            if (set) {
                throw startup_error("tls.cert", std::string("must be set for ") + key +
                                                    " (the default certificate; without it nothing speaks "
                                                    "TLS and " +
                                                    key + " would be ignored)");
            }
        }
    }
    // Names compare without case (as the handshake's match does): a name twice would leave the
    // later entry silently unused.
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < tls.sni.size(); ++i) {
        const tls_sni_config& e = tls.sni[i];
        const std::string at = "tls.sni[" + std::to_string(i) + "]";
        if (e.names.empty()) {
            throw startup_error(at + ".names", "must list at least one host name");
        }
        for (const std::string& n : e.names) {
            std::string why = detail::check_sni_name(n);
            if (!why.empty()) {
                throw startup_error(at + ".names", why);
            }
            std::string lower = n;
            std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
                return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
            });
            if (std::find(seen.begin(), seen.end(), lower) != seen.end()) {
                throw startup_error(at + ".names", quoted(n) +
                                                       " is named by an earlier entry or twice in this "
                                                       "one: only the first would ever be used");
            }
            seen.push_back(std::move(lower));
        }
        if (e.cert.empty()) {
            throw startup_error(at + ".cert", "must be set");
        }
        if (e.key.empty()) {
            throw startup_error(at + ".key", "must be set");
        }
    }
}

// What a listen value binds: all addresses of a family (IPv6's all-interfaces takes IPv4's
// too unless net.ipv6.bindv6only is set: the listeners leave IPV6_V6ONLY as the system has it),
// or one address, as IPv6 (IPv4 mapped).
struct bound_hosts {
    bool all_v4 = false;
    bool all_v6 = false;
    std::vector<std::array<unsigned char, 16>> addresses;
    std::string name; ///< a host name: not resolved here (no DNS while validating), compared as text
};

bool is_mapped_v4(const std::array<unsigned char, 16>& a) {
    return std::all_of(a.begin(), a.begin() + 10, [](unsigned char c) { return c == 0; }) && a[10] == 0xff &&
           a[11] == 0xff;
}

bool v6_sockets_take_v4() {
    std::ifstream f("/proc/sys/net/ipv6/bindv6only");
    int only = 0;
    return !(f >> only) || only == 0;
}

bound_hosts bound_hosts_of(const std::string& listen, const listen_address& parsed) {
    bound_hosts out;
    in_addr v4{};
    in6_addr v6{};
    if (!parsed.host.empty() && ::inet_pton(AF_INET, parsed.host.c_str(), &v4) != 1 &&
        ::inet_pton(AF_INET6, parsed.host.c_str(), &v6) != 1) {
        out.name = parsed.host;
        std::transform(out.name.begin(), out.name.end(), out.name.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return out;
    }
    detail::socket_address sa;
    try {
        sa = detail::resolve_listen_address(listen); // what the bind will use; numeric: no lookup
    } catch (const startup_error&) {
        return out; // nothing to compare: the bind says why, naming the key
    }
    std::array<unsigned char, 16> a{};
    if (sa.storage.ss_family == AF_INET) {
        a[10] = 0xff;
        a[11] = 0xff;
        std::memcpy(a.data() + 12, &reinterpret_cast<const sockaddr_in*>(&sa.storage)->sin_addr, 4);
    } else if (sa.storage.ss_family == AF_INET6) {
        std::memcpy(a.data(), &reinterpret_cast<const sockaddr_in6*>(&sa.storage)->sin6_addr, 16);
    } else {
        return out;
    }
    if (std::all_of(a.begin(), a.end(), [](unsigned char c) { return c == 0; })) {
        out.all_v6 = true;
        out.all_v4 = v6_sockets_take_v4();
    } else if (is_mapped_v4(a) && a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0) {
        out.all_v4 = true;
    } else {
        out.addresses.push_back(a);
    }
    return out;
}

bool covers(const bound_hosts& all, const bound_hosts& some) {
    if (all.all_v4 && all.all_v6) {
        return true;
    }
    if (all.all_v4) {
        return some.all_v4 || std::any_of(some.addresses.begin(), some.addresses.end(), is_mapped_v4);
    }
    if (all.all_v6) {
        return some.all_v6 || std::any_of(some.addresses.begin(), some.addresses.end(),
                                          [](const auto& a) { return !is_mapped_v4(a); });
    }
    return false;
}

// Whether two listen values would bind one socket, or overlapping ones: the same port (not 0,
// which the kernel picks afresh for each) on the same address, however it is spelled
// ("127.0.0.1", "[::ffff:127.0.0.1]"), or on all interfaces, which include every address of
// their family. Names are not looked up while validating (the bind does that, and a clash
// there still names the key being bound).
bool same_listener(const std::string& a_text, const std::string& b_text) {
    const listen_address a = parse_listen(a_text);
    const listen_address b = parse_listen(b_text);
    if (a.port == 0 || a.port != b.port) {
        return false;
    }
    const bound_hosts ha = bound_hosts_of(a_text, a);
    const bound_hosts hb = bound_hosts_of(b_text, b);
    if (!ha.name.empty() || !hb.name.empty()) {
        // A name against a name: the same spelling. Against all interfaces: it is one of them,
        // whichever address it resolves to. Against an address: unknown without a lookup.
        return ha.name == hb.name || ha.all_v4 || ha.all_v6 || hb.all_v4 || hb.all_v6;
    }
    if (covers(ha, hb) || covers(hb, ha)) {
        return true;
    }
    return std::any_of(ha.addresses.begin(), ha.addresses.end(), [&](const auto& x) {
        return std::find(hb.addresses.begin(), hb.addresses.end(), x) != hb.addresses.end();
    });
}

void validate_tls_listen(const config& cfg) {
    if (cfg.tls.listen.empty()) {
        return;
    }
    // A TLS listener without a certificate could only fail every handshake; and serving
    // plaintext there instead would betray clients told to expect TLS.
    if (cfg.tls.cert.empty()) {
        throw startup_error("tls.listen",
                            "needs tls.cert and tls.key (the TLS listener's certificate), got " +
                                quoted(cfg.tls.listen) + " without them");
    }
    // One socket cannot be both plaintext and TLS, nor public and admin.
    if (same_listener(cfg.tls.listen, cfg.listen)) {
        throw startup_error("tls.listen",
                            "must differ from listen (" + cfg.listen + "), got " + quoted(cfg.tls.listen));
    }
    if (!cfg.admin.listen.empty() && same_listener(cfg.tls.listen, cfg.admin.listen)) {
        throw startup_error("tls.listen", "must differ from admin.listen (" + cfg.admin.listen + "), got " +
                                              quoted(cfg.tls.listen));
    }
}

} // namespace

listen_address parse_listen(std::string_view text) {
    listen_address out;
    std::string why = parse_listen_into(text, out);
    if (!why.empty()) {
        throw startup_error("listen", why);
    }
    return out;
}

void set_config_value(config& cfg, std::string_view key, std::string_view value) {
    const key_spec* k = detail::find_config_key(key);
    if (k == nullptr) {
        throw startup_error(std::string(key), "unknown configuration key" + detail::did_you_mean_key(key));
    }
    detail::set_from_text(cfg, *k, value, {});
}

void validate_config(const config& cfg) {
    for (const key_spec& k : keys) {
        if (k.type == value_type::integer) {
            const std::uint64_t v = k.load_integer(cfg);
            if (v < k.min || v > k.max) {
                fail(k, range_text(k) + ", got " + std::to_string(v), {});
            }
        } else {
            config scratch;
            std::string why = k.store_text(scratch, k.load_text(cfg));
            if (!why.empty()) {
                fail(k, std::move(why), {});
            }
        }
    }
    // A certificate without its key (or the reverse) is half a TLS setup: refuse it rather than
    // serve plain HTTP to clients that were told to expect TLS.
    if (!cfg.tls.cert.empty() && cfg.tls.key.empty()) {
        throw startup_error("tls.key", "must be set when tls.cert is set");
    }
    if (cfg.tls.cert.empty() && !cfg.tls.key.empty()) {
        throw startup_error("tls.cert", "must be set when tls.key is set");
    }
    validate_tls_extras(cfg.tls);
    // Probes and scrapes on the public port would be reachable by every client and would
    // compete with traffic: the admin listener has an address of its own.
    if (!cfg.admin.listen.empty() && same_listener(cfg.admin.listen, cfg.listen)) {
        throw startup_error("admin.listen",
                            "must differ from listen (" + cfg.listen + "), got " + quoted(cfg.admin.listen));
    }
    validate_tls_listen(cfg);
}

void apply_config_env(config& cfg, std::span<const char* const> environment) {
    constexpr std::string_view prefix = "SLUICE_";
    for (const char* entry : environment) {
        if (entry == nullptr) {
            continue;
        }
        const std::string_view text(entry);
        const std::size_t eq = text.find('=');
        const std::string_view name = text.substr(0, eq);
        if (eq == std::string_view::npos || !name.starts_with(prefix) || name == "SLUICE_CONFIG") {
            continue;
        }
        const std::string_view value = text.substr(eq + 1);
        const key_spec* match = nullptr;
        std::vector<std::string> env_names;
        env_names.reserve(keys.size());
        for (const key_spec& k : keys) {
            env_names.push_back(detail::env_name(k.name));
            if (env_names.back() == name) {
                match = &k;
            }
        }
        if (match == nullptr) {
            std::vector<std::string_view> candidates(env_names.begin(), env_names.end());
            candidates.emplace_back("SLUICE_CONFIG");
            throw startup_error(std::string(name),
                                "unknown environment variable: sluice reads SLUICE_CONFIG and "
                                "SLUICE_<KEY> for its configuration keys" +
                                    detail::did_you_mean(name, candidates));
        }
        detail::set_from_text(cfg, *match, value, "from " + std::string(name));
    }
}

std::string describe_config(const config& cfg) {
    std::string out;
    for (const key_spec& k : keys) {
        out += k.name;
        out += " = ";
        out += detail::toml_value(cfg, k);
        out += '\n';
    }
    for (const tls_sni_config& e : cfg.tls.sni) {
        out += "[[tls.sni]]\nnames = [";
        for (std::size_t i = 0; i < e.names.size(); ++i) {
            out += (i == 0 ? "" : ", ") + toml_string(e.names[i]);
        }
        out += "]\ncert = " + toml_string(e.cert) + "\nkey = " + toml_string(e.key) + "\n";
    }
    return out;
}

} // namespace sluice
