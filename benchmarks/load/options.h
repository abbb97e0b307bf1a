// sluice-load's command line: a JMeter-shaped closed-loop test plan (users, ramp-up, loops or
// duration) and one request. Parsing is separate from the runner so it is unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::load {

enum class output_format { text, json, csv };

struct header_field {
    std::string name;
    std::string value;
};

struct load_options {
    // The test plan (JMeter's Thread Group).
    std::size_t users = 1;
    double ramp_up_s = 0;       ///< user i starts at i * ramp_up / users
    std::uint64_t loops = 0;    ///< requests per user; 0 = until duration
    double duration_s = 0;      ///< 0 = until every user has done its loops
    double window_start_s = -1; ///< steady window; < 0 = ramp_up + 1 s
    double window_end_s = -1;   ///< < 0 = the end of the run minus 1 s

    // The request.
    std::string method = "GET";
    bool tls = false;         ///< an https URL
    std::string host;         ///< from the URL: "host:port" (the upstream address)
    std::string target = "/"; ///< origin-form
    std::vector<header_field> headers;
    std::string body_file;   ///< --body-file
    std::string upload_file; ///< --upload FILE: multipart/form-data with one file part
    std::string upload_field = "file";
    std::chrono::milliseconds timeout{30000};
    std::chrono::milliseconds connect_timeout{2000};
    bool keep_alive = true;
    // TLS (https URLs): the server's certificate is verified against ca_file (else the
    // system's CAs) unless insecure.
    std::string ca_file;   ///< --cacert FILE
    bool insecure = false; ///< --insecure: no verification (curl -k)

    // Output.
    output_format format = output_format::text;
    bool progress = true;
    std::string label; ///< a name for the report row (default: METHOD URL)
};

/// Parses argv (without argv[0]). Throws std::invalid_argument with a message naming the
/// offending argument. `--help` is not handled here.
load_options parse_options(const std::vector<std::string_view>& args);

/// Splits "http://host:port/path?q" (or https) into host:port (port 80, or 443, by default) and
/// origin-form target; `tls` says which scheme. Throws std::invalid_argument for anything else.
void parse_url(std::string_view url, std::string& host, std::string& target, bool& tls);

extern const char* const usage_text;

} // namespace sluice::load
