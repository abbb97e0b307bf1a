// sluice-gateway: one upstream call in four styles (docs/gateway.md; SCENARIOS.md S1, S3).
//
//   GET  /api/{style}/work    → upstream GET /work (query passed through: ?ms=3000)
//   GET  /api/{style}/files   → upstream GET /files
//   POST /api/{style}/upload  → upstream POST /upload (the body forwarded without a copy)
//   GET  /api/{style}/bytes   → upstream GET /bytes (query passed through: ?n=N)
//   {style} = sync | async | resume | co
//
// 502 when the upstream fails, 504 when it times out, 503 from the limiter (--limit, on the
// endpoints of --limit-routes) or when the client's pool is full.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sluice/sluice.h>

#include "../common/app_main.h"
#include "gateway.h"

namespace {

// --upstream may repeat (several addresses of one upstream, round robin); parse_command_line
// keeps one value per option, so the occurrences are taken out of argv first.
std::vector<std::string> take_upstreams(int argc, char** argv, std::vector<char*>& rest) {
    std::vector<std::string> out;
    rest.push_back(argv[0]);
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--upstream") {
            if (i + 1 >= argc) {
                throw sluice::startup_error("upstream", "expected --upstream HOST:PORT");
            }
            out.emplace_back(argv[++i]);
        } else if (a.rfind("--upstream=", 0) == 0) {
            out.emplace_back(a.substr(11));
        } else {
            rest.push_back(argv[i]);
        }
    }
    return out;
}

std::uint64_t parse_number(const std::string& key, const std::string& v, std::uint64_t max,
                           std::uint64_t min = 0) {
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || n < min || n > max) {
        throw sluice::startup_error(key, "expected a whole number in [" + std::to_string(min) + ", " +
                                             std::to_string(max) + "], got \"" + v + "\"");
    }
    return n;
}

std::chrono::milliseconds parse_ms(const std::string& key, const std::string& v, std::uint64_t min = 0) {
    return std::chrono::milliseconds(parse_number(key, v, 3'600'000, min));
}

// A PEM file a flag names, checked here so that the error names the flag: readable, and a
// regular file (O_NONBLOCK: a FIFO is refused at once rather than waited on).
void check_pem_file(const std::string& key, const std::string& path) {
    if (path.empty()) {
        return;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        throw sluice::startup_error(key,
                                    "cannot open '" + path + "': " + std::generic_category().message(errno));
    }
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    ::close(fd);
    if (!regular) {
        throw sluice::startup_error(key, "'" + path + "' is not a regular file");
    }
}

// The client names what it finds wrong in its TLS files by its own options
// (client.tls.cert_file); the user typed the gateway's flags: the error names those.
sluice::startup_error upstream_error(std::string_view text) {
    static constexpr std::pair<std::string_view, std::string_view> names[] = {
        {"ca_file", "upstream-ca-file"},
        {"cert_file", "upstream-cert-file"},
        {"key_file", "upstream-key-file"},
        {"server_name", "upstream-server-name"},
    };
    static constexpr std::string_view prefix = "client.tls.";
    // The option at the start of `rest` (qualified or bare), and its length; {} if none.
    const auto option_at = [](std::string_view rest) -> std::pair<std::string_view, std::size_t> {
        const std::size_t skip = rest.starts_with(prefix) ? prefix.size() : 0;
        for (const auto& [option, flag] : names) {
            if (rest.substr(skip).starts_with(option)) {
                return {flag, skip + option.size()};
            }
        }
        return {};
    };
    std::string key = "upstream";
    if (const auto [flag, len] = option_at(text); flag.data() != nullptr && text.starts_with(prefix)) {
        key = flag; // "client.tls.key_file: empty, ..." is about --upstream-key-file
        text.remove_prefix(len);
        text.remove_prefix(std::min(text.find_first_not_of(": "), text.size()));
    }
    // The option names elsewhere in the message ("but cert_file is set"); never inside a quoted
    // path ('/etc/pki/ca_file.pem').
    std::string out;
    bool quoted = false;
    for (std::size_t i = 0; i < text.size();) {
        quoted = quoted != (text[i] == '\'');
        const auto [flag, len] =
            quoted ? std::pair<std::string_view, std::size_t>{} : option_at(text.substr(i));
        if (flag.data() != nullptr) {
            out += "--" + std::string(flag);
            i += len;
        } else {
            out += text[i++];
        }
    }
    return {key, out};
}

} // namespace

int main(int argc, char** argv) {
    return apps::run_app("sluice-gateway", [&] {
        std::vector<char*> rest;
        std::vector<std::string> upstreams = take_upstreams(argc, argv, rest);
        const sluice::client_options defaults;
        std::string pool_size = std::to_string(defaults.max_connections);
        std::string max_pending = std::to_string(defaults.max_pending);
        std::string acquire_ms = std::to_string(defaults.acquire_timeout.count());
        std::string connect_ms = std::to_string(defaults.connect_timeout.count());
        std::string response_ms = std::to_string(defaults.response_timeout.count());
        std::string idle_ms = std::to_string(defaults.idle_timeout.count());
        std::string resolve_ms = std::to_string(sluice::upstream_options{}.resolve_interval.count());
        std::string limit = "0";
        std::string limit_queue = "1000";
        std::string limit_wait_ms = "5000";
        std::string ca_file;
        std::string tls_verify = "on";
        std::string server_name;
        std::string cert_file;
        std::string key_file;
        std::string limit_routes;
        bool limit_routes_given = false; // "--limit-routes ''" names no endpoint: an error, not "all"
        const sluice::app_option options[] = {
            {"upstream", "HOST:PORT|https://HOST[:PORT]",
             "an address of the upstream (repeatable: round robin); https:// speaks TLS", nullptr},
            {"pool-size", "N", "connections per I/O loop to the upstream (default 100)", &pool_size},
            {"max-pending", "N", "calls per loop waiting for a pool connection (default 1000)", &max_pending},
            {"acquire-timeout-ms", "MS", "longest wait for a pool connection (default 5000)", &acquire_ms},
            {"connect-timeout-ms", "MS", "longest connect to the upstream, at least 1 (default 2000)",
             &connect_ms},
            {"response-timeout-ms", "MS",
             "longest upstream call, request to last byte, at least 1 (default 30000)", &response_ms},
            {"idle-timeout-ms", "MS", "pooled idle connections close after this (default 50000)", &idle_ms},
            {"resolve-interval-ms", "MS",
             "look upstream host names up again this often (default 30000; 0 = only at startup)",
             &resolve_ms},
            {"limit", "N", "requests admitted at once, limited routes together (default 0 = unlimited)",
             &limit},
            {"limit-queue", "Q", "requests waiting for a permit (default 1000)", &limit_queue},
            {"limit-wait-ms", "W",
             "longest wait for a permit, then 503; at least 1 with --limit-queue above 0 (default 5000)",
             &limit_wait_ms},
            {"upstream-ca-file", "PATH",
             "PEM CAs trusted for https upstreams (default: the system's); needs an https upstream",
             &ca_file},
            {"upstream-tls-verify", "on|off",
             "check https upstreams' certificates (default on; off logs a warning)", &tls_verify},
            {"upstream-server-name", "NAME",
             "SNI and certificate name for https upstreams (default: the host)", &server_name},
            {"upstream-cert-file", "PATH",
             "PEM client certificate chain for https upstreams that ask for one (with --upstream-key-file)",
             &cert_file},
            {"upstream-key-file", "PATH", "PEM private key of --upstream-cert-file", &key_file},
            {"limit-routes", "LIST", "endpoints behind --limit: work,files,upload,bytes (default: all)",
             &limit_routes, &limit_routes_given},
        };
        std::string ignored_upstream; // --upstream is taken out above; listed for --help
        std::vector<sluice::app_option> opts(std::begin(options), std::end(options));
        opts[0].target = &ignored_upstream;
        auto cl = sluice::parse_command_line(
            static_cast<int>(rest.size()), rest.data(), sluice::process_environment(), opts,
            "sluice-gateway: /api/{sync,async,resume,co}/{work,files,upload,bytes} "
            "proxied to one upstream");
        if (cl.help) {
            std::fputs(cl.usage.c_str(), stdout);
            return 0;
        }
        if (upstreams.empty()) {
            throw sluice::startup_error("upstream", "expected at least one --upstream HOST:PORT");
        }
        sluice::client_options co;
        co.max_connections = parse_number("pool-size", pool_size, 1'000'000, 1);
        co.max_pending = parse_number("max-pending", max_pending, 10'000'000);
        co.acquire_timeout = parse_ms("acquire-timeout-ms", acquire_ms);
        // A zero connect or response timeout would fire at once: every request a 504. At least
        // 1 ms, as the server's own timeouts (config.cc).
        co.connect_timeout = parse_ms("connect-timeout-ms", connect_ms, 1);
        co.response_timeout = parse_ms("response-timeout-ms", response_ms, 1);
        co.idle_timeout = parse_ms("idle-timeout-ms", idle_ms);
        // The limiter's flags are checked whether --limit turns it on or not: never ignored.
        sluice::limiter_options lo;
        lo.permits = parse_number("limit", limit, 10'000'000);
        lo.max_queue = parse_number("limit-queue", limit_queue, 10'000'000);
        lo.wait_timeout = parse_ms("limit-wait-ms", limit_wait_ms);
        if (lo.max_queue > 0 && lo.wait_timeout.count() == 0) {
            throw sluice::startup_error("limit-wait-ms", "must be at least 1 while --limit-queue is above 0 "
                                                         "(a waiter never waits for ever)");
        }
        // TLS flags with no https upstream would be silently unused; with one, a file that
        // cannot be read is named by its flag.
        const bool any_https = std::any_of(upstreams.begin(), upstreams.end(),
                                           [](const std::string& u) { return u.rfind("https://", 0) == 0; });
        if (!any_https) {
            const std::pair<bool, const char*> tls_flags[] = {
                {!ca_file.empty(), "upstream-ca-file"},         {tls_verify != "on", "upstream-tls-verify"},
                {!server_name.empty(), "upstream-server-name"}, {!cert_file.empty(), "upstream-cert-file"},
                {!key_file.empty(), "upstream-key-file"},
            };
            for (const auto& [set, flag] : tls_flags) {
                if (set) {
                    throw sluice::startup_error(flag, "needs an https:// --upstream (every --upstream here "
                                                      "speaks plain HTTP)");
                }
            }
        }
        check_pem_file("upstream-ca-file", ca_file);
        check_pem_file("upstream-cert-file", cert_file);
        check_pem_file("upstream-key-file", key_file);
        co.tls.ca_file = ca_file;
        co.tls.server_name = server_name;
        co.tls.cert_file = cert_file;
        co.tls.key_file = key_file;
        if (tls_verify == "off") {
            co.tls.verify = sluice::tls_verify::none;
        } else if (tls_verify != "on") {
            throw sluice::startup_error("upstream-tls-verify",
                                        "expected on or off, got \"" + tls_verify + "\"");
        }
        const sluice::upstream_options uo{.resolve_interval = parse_ms("resolve-interval-ms", resolve_ms)};
        std::unique_ptr<gateway::gateway> g;
        try {
            g = std::make_unique<gateway::gateway>(sluice::upstream(upstreams, uo), co);
        } catch (const std::invalid_argument& e) {
            throw upstream_error(e.what());
        }
        if (lo.permits > 0) {
            try {
                g->limit = std::make_unique<sluice::limiter>(lo);
            } catch (const std::invalid_argument& e) {
                throw sluice::startup_error("limit", e.what());
            }
        }
        if (limit_routes_given) {
            if (!g->limit) {
                throw sluice::startup_error("limit-routes", "needs --limit N");
            }
            try {
                g->limited_endpoints = gateway::parse_endpoints(limit_routes);
            } catch (const std::invalid_argument& e) {
                throw sluice::startup_error("limit-routes", e.what());
            }
        }
        {
            sluice::server srv(cl.cfg); // stopped and destroyed before the client it calls
            gateway::add_routes(srv, *g);
            // Metrics (sluice_client_*{upstream="api"}): the pool's connections open and idle,
            // calls pending, and failures by kind. The server ends before g.
            srv.watch("api", [&api = g->api] { return api.stats(); });
            if (g->limit) {
                // Metrics (sluice_limiter_*) and /readyz: a saturated limiter (every permit held,
                // the queue full) makes the instance not ready, so a load balancer sends elsewhere.
                srv.watch("gateway", *g->limit);
            }
            srv.run_until_signal();
        }
        return 0;
    });
}
