#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "metrics/exposition.h"
#include "metrics/snapshot.h"

namespace sluice::detail {

namespace {

constexpr std::array<std::string_view, status_classes> class_labels{"1xx", "2xx", "3xx", "4xx", "5xx"};

// Two routes may share a template (GET and POST /items): one series per template, as the
// route label promises.
std::vector<std::pair<std::string_view, route_totals>> by_template(const metrics_snapshot& s) {
    std::vector<std::pair<std::string_view, route_totals>> out;
    for (std::size_t r = 0; r < s.requests.size(); ++r) {
        const std::string_view name = r < s.routes.size() ? std::string_view(s.routes[r]) : unmatched_route;
        auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == name; });
        if (it == out.end()) {
            out.emplace_back(name, route_totals{});
            it = out.end() - 1;
        }
        const route_totals& src = s.requests[r];
        for (std::size_t m = 0; m < metric_methods.size(); ++m) {
            for (std::size_t c = 0; c < status_classes; ++c) {
                it->second.requests[m][c] += src.requests[m][c];
            }
        }
        for (std::size_t b = 0; b < src.buckets.size(); ++b) {
            it->second.buckets[b] += src.buckets[b];
        }
        it->second.duration_ns += src.duration_ns;
    }
    return out;
}

void render_requests(exposition& e, const metrics_snapshot& s) {
    const auto routes = by_template(s);
    e.family("sluice_http_requests_total", "counter",
             "HTTP requests answered, by route template, method and status class");
    for (const auto& [route, t] : routes) {
        for (std::size_t m = 0; m < metric_methods.size(); ++m) {
            for (std::size_t c = 0; c < status_classes; ++c) {
                // Series that never counted are left out: a route served only by GET does not
                // list 40 zeros.
                if (t.requests[m][c] != 0) {
                    e.sample(
                        "sluice_http_requests_total",
                        {{"route", route}, {"method", metric_methods[m]}, {"code_class", class_labels[c]}},
                        t.requests[m][c]);
                }
            }
        }
    }
    e.family("sluice_http_request_duration_seconds", "histogram",
             "time from the first byte of a request to its response being queued, by route template");
    for (const auto& [route, t] : routes) {
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < latency_buckets.size(); ++b) {
            cumulative += t.buckets[b];
            const std::string le = format_metric_value(latency_buckets[b]);
            e.sample("sluice_http_request_duration_seconds_bucket", {{"route", route}, {"le", le}},
                     cumulative);
        }
        cumulative += t.buckets.back();
        e.sample("sluice_http_request_duration_seconds_bucket", {{"route", route}, {"le", "+Inf"}},
                 cumulative);
        e.sample("sluice_http_request_duration_seconds_sum", {{"route", route}},
                 static_cast<double>(t.duration_ns) / 1e9);
        e.sample("sluice_http_request_duration_seconds_count", {{"route", route}}, cumulative);
    }
}

void render_server(exposition& e, const metrics_snapshot& s) {
    const server_stats& st = s.server;
    e.single("sluice_connections_accepted_total", "counter", "connections accepted", st.connections_accepted);
    e.single(
        "sluice_connections_rejected_total", "counter",
        "connections closed at once because limits.max_connections (or the blocking accept queue) was full",
        st.connections_refused);
    e.single("sluice_connections_open", "gauge", "connections open now", st.connections_open);
    e.single("sluice_connections_lingering", "gauge",
             "open connections whose last response is out, reading what the client still sends",
             st.connections_lingering);
    e.single("sluice_http_requests_in_flight", "gauge",
             "requests being handled now (suspended ones included)", st.exchanges_live);
    e.single("sluice_http_requests_suspended", "gauge", "requests suspended in start_async() now",
             st.exchanges_suspended);
    e.single("sluice_async_timeouts_total", "counter", "async exchanges whose timeout fired",
             st.async_timeouts);
    e.single("sluice_async_errors_total", "counter",
             "async exchanges ended by an error (client gone, write failed, handler threw, shutdown)",
             st.async_errors);
    e.single("sluice_watchdog_events_total", "counter", "loop iterations longer than watchdog_ms",
             s.watchdog_events);
    e.family("sluice_loop_busy_seconds", "gauge",
             "how long the longest-running current loop iteration has run (the lag of a new event)");
    e.sample("sluice_loop_busy_seconds", {}, s.loop_busy_seconds);
    e.family("sluice_ready", "gauge", "1 when /readyz says ready");
    e.sample("sluice_ready", std::uint64_t{s.ready ? 1U : 0U});
}

void render_limiters(exposition& e, const metrics_snapshot& s) {
    if (s.limiters.empty()) {
        return;
    }
    auto each = [&](std::string_view name, std::string_view type, std::string_view help, auto get) {
        e.family(name, type, help);
        for (const limiter_figures& l : s.limiters) {
            e.sample(name, {{"limiter", l.name}}, static_cast<std::uint64_t>(get(l)));
        }
    };
    each("sluice_limiter_permits", "gauge", "permits of the limiter", [](auto& l) { return l.permits; });
    each("sluice_limiter_in_use", "gauge", "permits held now", [](auto& l) { return l.stats.in_use; });
    each("sluice_limiter_queued", "gauge", "waiters now", [](auto& l) { return l.stats.queued; });
    each("sluice_limiter_granted_total", "counter", "permits granted",
         [](auto& l) { return l.stats.granted; });
    each("sluice_limiter_rejected_total", "counter", "turned away: the queue was full",
         [](auto& l) { return l.stats.rejected; });
    each("sluice_limiter_timed_out_total", "counter", "waited wait_timeout without a permit",
         [](auto& l) { return l.stats.timed_out; });
}

void render_clients(exposition& e, const metrics_snapshot& s) {
    if (s.clients.empty()) {
        return;
    }
    auto each = [&](std::string_view name, std::string_view type, std::string_view help, auto get) {
        e.family(name, type, help);
        for (const client_figures& c : s.clients) {
            e.sample(name, {{"upstream", c.name}}, static_cast<std::uint64_t>(get(c.stats)));
        }
    };
    each("sluice_client_connections_open", "gauge", "upstream connections open (busy + idle)",
         [](auto& c) { return c.open; });
    each("sluice_client_connections_idle", "gauge", "upstream connections idle in a pool",
         [](auto& c) { return c.idle; });
    each("sluice_client_calls_pending", "gauge",
         "calls without a connection yet: queued for the pool or waiting for their connect",
         [](auto& c) { return c.pending; });
    each("sluice_client_connects_total", "counter", "upstream connections opened",
         [](auto& c) { return c.connects; });
    each("sluice_client_reused_total", "counter", "calls served on a pooled connection",
         [](auto& c) { return c.reused; });
    each("sluice_client_retried_total", "counter", "calls retried on a fresh connection",
         [](auto& c) { return c.retried; });
    each("sluice_client_completed_total", "counter", "calls completed with a response",
         [](auto& c) { return c.completed; });
    each("sluice_client_failed_total", "counter", "calls completed with an error",
         [](auto& c) { return c.failed; });
    each("sluice_client_tls_handshakes_total", "counter", "TLS handshakes completed (https upstreams)",
         [](auto& c) { return c.tls_handshakes; });
    each("sluice_client_tls_resumed_total", "counter",
         "of those, resumed from an earlier connection's session", [](auto& c) { return c.tls_resumed; });
    e.family("sluice_client_failures_total", "counter",
             "calls completed with an error, by kind (client_errc)");
    for (const client_figures& c : s.clients) {
        // Every kind, zeros included: a series that appears only with its first failure
        // hides that failure from rate() and increase().
        for (std::size_t k = 1; k <= client_errc_count; ++k) {
            const auto kind = static_cast<client_errc>(k);
            e.sample("sluice_client_failures_total", {{"upstream", c.name}, {"kind", client_errc_name(kind)}},
                     c.stats.failures(kind));
        }
    }
}

void render_process(exposition& e, const metrics_snapshot& s) {
    if (s.access_log_on) {
        e.single("sluice_access_log_lines_total", "counter", "access log lines written",
                 s.access_log.written);
        e.single("sluice_access_log_dropped_total", "counter",
                 "access log lines dropped because a loop's queue was full", s.access_log.dropped);
        e.single("sluice_access_log_write_errors_total", "counter",
                 "access log lines lost because the file could not be opened or written",
                 s.access_log.write_errors);
    }
    // The names of the Prometheus client libraries' process collectors, so dashboards fit.
    e.single("process_resident_memory_bytes", "gauge", "resident memory size in bytes",
             s.process.resident_bytes);
    e.single("process_threads", "gauge", "threads of the process", s.process.threads);
    e.family("process_cpu_seconds_total", "counter", "user and system CPU time in seconds");
    e.sample("process_cpu_seconds_total", {}, s.process.cpu_seconds);
    e.single("process_open_fds", "gauge", "open file descriptors", s.process.open_fds);
}

} // namespace

std::string render_metrics(const metrics_snapshot& s) {
    exposition e;
    render_requests(e, s);
    render_server(e, s);
    render_limiters(e, s);
    render_clients(e, s);
    render_process(e, s);
    return e.take();
}

} // namespace sluice::detail
