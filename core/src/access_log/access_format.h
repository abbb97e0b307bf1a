// One access log line, in the combined format (Apache's and nginx's default: what log
// analysers read) or as one JSON object per line (what log pipelines read).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include <sluice/request.h>

namespace sluice::detail {

enum class access_log_format { combined, json };

struct access_record {
    std::string_view remote; ///< "ip:port" or "[v6]:port"; the log shows the address
    std::string_view method; ///< "" when the request line was never parsed
    std::string_view target;
    http_version version{1, 1};
    int status = 0;
    std::size_t body_bytes = 0;  ///< response body bytes (a stream: those queued so far)
    std::string_view referer;    ///< "" when absent
    std::string_view user_agent; ///< "" when absent
    std::chrono::system_clock::time_point time;
    std::chrono::nanoseconds duration{0};
};

/// Appends one line, ending in '\n'. Bytes a terminal or a parser could misread (control
/// characters, quotes, backslashes, non-ASCII) are escaped as \xHH, as nginx does; JSON strings
/// are escaped by RFC 8259 with \u00HH.
void append_access_line(std::string& out, const access_record& r, access_log_format f);

/// The address part of "ip:port" / "[v6]:port".
std::string_view address_of(std::string_view remote) noexcept;

} // namespace sluice::detail
