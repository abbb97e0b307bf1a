// Server configuration: defaults, then a TOML file, then SLUICE_* environment
// variables, then command-line flags, each overriding the one before.
//
// Every key has one canonical dotted name ("limits.max_body_bytes"); the file uses
// it as TOML tables, the environment as SLUICE_LIMITS_MAX_BODY_BYTES, the command
// line as --set limits.max_body_bytes=N (and the common keys have short flags).
// Units are in the key names. An unknown key or a bad value is a startup_error
// naming the key; nothing falls back to a default silently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/error.h>

namespace sluice {

enum class dispatch_mode {
    inline_io, ///< "inline": handlers run on the I/O thread
    pool,      ///< "pool": handlers run on a worker pool
};

enum class log_level { error, warn, info, debug };

struct limits_config {
    std::size_t max_header_bytes =
        8192; ///< request line + headers, and trailers; more → 431 (414 for the target)
    std::size_t max_body_bytes = std::size_t{1024} * 1024; ///< more → 413
    std::uint32_t header_timeout_ms = 10'000;              ///< first byte to end of head; → 408
    std::uint32_t body_timeout_ms = 30'000;                ///< end of head to end of body; → 408
    std::uint32_t idle_timeout_ms = 60'000; ///< keep-alive wait for the next request; → close
    /// A client that reads nothing this long is closed; so is one that has not read everything
    /// queued for it this long after it was queued, plus min_send_rate's allowance (README).
    std::uint32_t write_timeout_ms = 30'000;
    /// Bytes per second a client must read at the least: each queued byte adds 1/min_send_rate s
    /// to the write timeout; 0 = none (write_timeout_ms caps the whole send).
    std::uint32_t min_send_rate = 1024;
    /// After a last response with the client's input unread (an error mid-request, requests
    /// pipelined behind it): the sending side is shut and input dropped for up to this long
    /// before closing, so that the close does not reset the response away; over TLS also
    /// while the response is not yet acknowledged (docs/tls.md); 0 = close at once.
    std::uint32_t lingering_timeout_ms = 5'000;
    std::uint32_t max_connections = 10'000;   ///< per server; beyond it new connections are closed at once
    std::uint32_t max_keepalive_requests = 0; ///< requests per connection before close; 0 = unlimited
};

struct blocking_config {
    std::uint32_t threads = 200; ///< connection threads (Tomcat maxThreads)
    /// Accepted connections waiting for a thread (Tomcat acceptCount); beyond, the acceptor stops
    /// and the kernel's backlog holds them. 0: none wait; one arriving while every thread is
    /// busy is closed at once.
    std::uint32_t accept_queue = 100;
};

/// One [[tls.sni]] entry: the certificate shown to clients that ask for one of `names`.
struct tls_sni_config {
    std::vector<std::string> names; ///< host names; "*.example.com" matches one label under it
    std::string cert;               ///< PEM certificate chain file
    std::string key;                ///< PEM private key file (unencrypted)
};

/// Whether the server asks for a client certificate (tls.verify_client).
enum class tls_verify_client {
    off,      ///< never asks
    optional, ///< asks; a client without one is served, one with a bad one is refused
    require,  ///< asks; a client without a good one is refused at the handshake
};

struct tls_config {
    /// PEM certificate chain file. Set without `listen`: the one listener (config::listen) speaks
    /// TLS only. Set with `listen`: config::listen stays plaintext and `listen` speaks TLS.
    std::string cert;
    std::string key;                 ///< PEM private key file (unencrypted)
    std::string min_version = "1.2"; ///< "1.2" or "1.3"
    std::string ciphers;             ///< TLS 1.2 cipher list (OpenSSL syntax); "" = ECDHE + AEAD only
    std::string ciphersuites;        ///< TLS 1.3 suites; "" = OpenSSL's default (all AEAD)
    std::uint32_t handshake_timeout_ms = 10'000; ///< accept to end of handshake; then close
    /// More certificates, chosen by the name the client sends (SNI); an unknown name or none
    /// gets cert/key. Set from the config file only ([[tls.sni]] tables).
    std::vector<tls_sni_config> sni;
    std::string client_ca; ///< PEM file of the CAs client certificates must chain to
    tls_verify_client verify_client = tls_verify_client::off;
    bool ktls = false; ///< try kernel TLS (probed at start; userspace TLS when unavailable)
    /// A second listener, "host:port" as config::listen, that speaks TLS while config::listen
    /// stays plaintext (nginx's `listen 80; listen 443 ssl;`): the same routes, loops and
    /// limits. "" = off. Needs cert; never the address of config::listen or admin.listen.
    std::string listen;
};

/// The admin listener (docs/operations.md): /metrics, /healthz, /readyz on an address of its own,
/// so that probes and scrapes never compete with traffic and never face the public network.
struct admin_config {
    std::string listen; ///< "" = off; else "host:port" as `listen`, and never the same address
};

/// The access log (docs/operations.md): written off the I/O loops; lines a full queue cannot
/// take are dropped and counted, never waited for.
struct access_log_config {
    std::string path;                  ///< "" = off; "-" = stdout; else a file, appended to
    std::string format = "combined";   ///< "combined" (Apache/nginx) or "json" (one object per line)
    std::uint32_t queue_lines = 65536; ///< lines queued, over all loops, before lines are dropped
};

struct config {
    std::string backend = "auto";          ///< a registered backend name, or "auto"
    std::string listen = "127.0.0.1:8080"; ///< "host:port", "[v6]:port" or ":port"
    std::uint32_t io_threads = 1;          ///< event loops (reactor backends)
    dispatch_mode dispatch = dispatch_mode::inline_io;
    std::uint32_t worker_threads = 8;        ///< pool size for dispatch = pool
    std::uint32_t async_timeout_ms = 30'000; ///< default start_async() timeout
    std::uint32_t watchdog_ms = 500;         ///< log a loop stuck in one iteration this long; 0 = off
    /// On stop: how long requests in progress (suspended ones included) may take to finish
    /// before they end with 503 and on_error(shutting_down); 0 = end them at once.
    std::uint32_t shutdown_timeout_ms = 10'000;
    /// On stop: how long the server keeps serving, and accepting, with /readyz at 503 before
    /// its listeners close, so that a balancer probing /readyz takes it out first (Spring
    /// Boot's and Envoy's drain delay). Responses in that time say Connection: close. A second
    /// stop() (a second SIGTERM or SIGINT) ends the delay at once. 0 = close at once.
    std::uint32_t shutdown_delay_ms = 0;
    /// A Unix socket path for zero-downtime restarts (docs/operations.md): a server started
    /// while another holds this socket takes over its listening sockets instead of binding, and
    /// the old one then drains and stops; "" = off.
    std::string handover_socket;
    log_level log = log_level::info; ///< key "log_level"
    blocking_config blocking;
    limits_config limits;
    tls_config tls;
    admin_config admin;
    access_log_config access_log;
};

/// A parsed `listen` value.
struct listen_address {
    std::string host;       ///< "" for all interfaces; an IPv4 address, a host name, or an IPv6 address
    std::uint16_t port = 0; ///< 0 asks the kernel for a free port
    bool ipv6 = false;      ///< host was given in brackets
};

/// Parses "host:port", "[v6]:port" or ":port" (all interfaces). Throws startup_error naming
/// "listen" on anything else. The server binds with this, so validation and use agree.
listen_address parse_listen(std::string_view text);

/// Checks every key's range and the rules between keys (tls.cert needs tls.key). The parsers
/// check values as they set them; call this on a config filled in by code. parse_command_line
/// calls it last. Throws startup_error naming the key.
void validate_config(const config& cfg);

/// Sets one key from its text form, as the environment and the command line give it.
/// Throws startup_error naming the key on an unknown key or a bad value.
void set_config_value(config& cfg, std::string_view key, std::string_view value);

/// Applies a TOML document (text) to cfg; `origin` names it in errors (a file path).
void apply_config_toml(config& cfg, std::string_view toml_text, std::string_view origin);

/// Applies a TOML file.
void apply_config_file(config& cfg, const std::string& path);

/// Applies SLUICE_* variables from an environment given as "NAME=value" strings
/// (pass `environ`). SLUICE_CONFIG is the config file path and is not a key.
void apply_config_env(config& cfg, std::span<const char* const> environment);

/// The text of every key with its current value, one "key = value" per line (TOML).
std::string describe_config(const config& cfg);

/// An app-specific command-line option ("--upstream URL") with its help line.
struct app_option {
    std::string name; ///< without dashes: "upstream"
    std::string value_name;
    std::string help;
    std::string* target;
    bool* given = nullptr; ///< if set: true once the flag appears (an empty value included)
};

struct command_line {
    config cfg;
    bool help = false; ///< --help was given; usage holds the text to print
    std::string usage;
};

/// The whole pipeline: defaults → --config file (or SLUICE_CONFIG) → environment → flags.
/// Flags: --backend, --listen, --io-threads, --dispatch, --worker-threads, --threads
/// (blocking.threads), --tls-listen (tls.listen), --config, --set key=value, --help, and the
/// app's own options.
/// Both "--flag value" and "--flag=value" work. Throws startup_error on anything bad.
command_line parse_command_line(int argc, const char* const* argv, std::span<const char* const> environment,
                                std::span<const app_option> app_options = {},
                                std::string_view program_summary = {});

} // namespace sluice

namespace sluice {
/// The process environment (`environ`), in the form parse_command_line takes.
std::span<const char* const> process_environment() noexcept;
} // namespace sluice
