// The Prometheus text format of /metrics, on snapshots built by hand.
#include <gtest/gtest.h>

#include <string>

#include "metrics/exposition.h"
#include "metrics/snapshot.h"

namespace sluice::detail {
namespace {

bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
        ++n;
    }
    return n;
}

TEST(exposition, label_values_escape_backslash_quote_and_newline) {
    EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    exposition e;
    e.family("x_total", "counter", "help with \\ and\nnewline");
    e.sample("x_total", {{"route", "/a\"b"}, {"method", "GET"}}, std::uint64_t{3});
    EXPECT_EQ(e.text(), "# HELP x_total help with \\\\ and\\nnewline\n# TYPE x_total counter\n"
                        "x_total{route=\"/a\\\"b\",method=\"GET\"} 3\n");
}

TEST(exposition, values_are_exact_integers_or_shortest_doubles) {
    EXPECT_EQ(format_metric_value(0.005), "0.005");
    EXPECT_EQ(format_metric_value(10.0), "10");
    EXPECT_EQ(format_metric_value(1.0 / 0.0), "+Inf");
    EXPECT_EQ(format_metric_value(-1.0 / 0.0), "-Inf");
    EXPECT_EQ(format_metric_value(0.0 / 0.0), "NaN");
    exposition e;
    e.sample("big", std::uint64_t{18446744073709551615ULL});
    EXPECT_EQ(e.text(), "big 18446744073709551615\n");
}

metrics_snapshot two_routes() {
    metrics_snapshot s;
    s.routes = {"/", "/items/{id}", "/items/{id}"}; // GET and POST share a template
    s.requests.resize(4);
    s.requests[0].requests[method_index("GET")][class_index(200)] = 5;
    s.requests[0].buckets[0] = 4;  // <= 5 ms
    s.requests[0].buckets[11] = 1; // > 10 s
    s.requests[0].duration_ns = 12'500'000'000;
    s.requests[1].requests[method_index("GET")][class_index(404)] = 2;
    s.requests[1].buckets[3] = 2;
    s.requests[2].requests[method_index("POST")][class_index(201)] = 1;
    s.requests[2].buckets[3] = 1;
    s.requests[3].requests[method_index("BREW")][class_index(405)] = 1; // unmatched
    s.requests[3].buckets[0] = 1;
    s.server.connections_accepted = 7;
    s.server.connections_refused = 2;
    s.server.exchanges_suspended = 1;
    s.ready = true;
    return s;
}

TEST(render_metrics, requests_by_route_method_and_class) {
    const std::string t = render_metrics(two_routes());
    EXPECT_TRUE(has_line(t, "sluice_http_requests_total{route=\"/\",method=\"GET\",code_class=\"2xx\"} 5"));
    EXPECT_TRUE(
        has_line(t, "sluice_http_requests_total{route=\"/items/{id}\",method=\"GET\",code_class=\"4xx\"} 2"));
    EXPECT_TRUE(has_line(
        t, "sluice_http_requests_total{route=\"/items/{id}\",method=\"POST\",code_class=\"2xx\"} 1"));
    EXPECT_TRUE(has_line(
        t, "sluice_http_requests_total{route=\"(unmatched)\",method=\"other\",code_class=\"4xx\"} 1"));
    // Zero series are left out; each family is declared once.
    EXPECT_EQ(count_of(t, "sluice_http_requests_total{route=\"/\""), 1U);
    EXPECT_EQ(count_of(t, "# TYPE sluice_http_requests_total counter\n"), 1U);
    EXPECT_EQ(count_of(t, "# TYPE sluice_http_request_duration_seconds histogram\n"), 1U);
}

TEST(render_metrics, histogram_buckets_are_cumulative_and_merge_a_shared_template) {
    const std::string t = render_metrics(two_routes());
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_bucket{route=\"/\",le=\"0.005\"} 4"));
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_bucket{route=\"/\",le=\"10\"} 4"));
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_bucket{route=\"/\",le=\"+Inf\"} 5"));
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_sum{route=\"/\"} 12.5"));
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_count{route=\"/\"} 5"));
    EXPECT_TRUE(
        has_line(t, "sluice_http_request_duration_seconds_bucket{route=\"/items/{id}\",le=\"0.025\"} 0"));
    EXPECT_TRUE(
        has_line(t, "sluice_http_request_duration_seconds_bucket{route=\"/items/{id}\",le=\"0.05\"} 3"));
    EXPECT_TRUE(has_line(t, "sluice_http_request_duration_seconds_count{route=\"/items/{id}\"} 3"));
    EXPECT_EQ(count_of(t, "sluice_http_request_duration_seconds_count{route=\"/items/{id}\"}"), 1U);
}

TEST(render_metrics, server_limiter_client_and_process_families) {
    metrics_snapshot s = two_routes();
    s.limiters.push_back(
        {"uploads", limiter_stats{.in_use = 50, .queued = 3, .granted = 90, .rejected = 4, .timed_out = 1},
         50});
    s.clients.push_back({"backend", client_stats{.connects = 2, .completed = 10, .failed = 1, .open = 2}});
    s.access_log_on = true;
    s.access_log = {.written = 9, .dropped = 1, .write_errors = 0};
    s.process.resident_bytes = 4096;
    s.process.threads = 3;
    const std::string t = render_metrics(s);
    EXPECT_TRUE(has_line(t, "sluice_connections_accepted_total 7"));
    EXPECT_TRUE(has_line(t, "sluice_connections_rejected_total 2"));
    EXPECT_TRUE(has_line(t, "sluice_http_requests_suspended 1"));
    EXPECT_TRUE(has_line(t, "sluice_ready 1"));
    EXPECT_TRUE(has_line(t, "sluice_limiter_in_use{limiter=\"uploads\"} 50"));
    EXPECT_TRUE(has_line(t, "sluice_limiter_queued{limiter=\"uploads\"} 3"));
    EXPECT_TRUE(has_line(t, "sluice_limiter_rejected_total{limiter=\"uploads\"} 4"));
    EXPECT_TRUE(has_line(t, "sluice_limiter_timed_out_total{limiter=\"uploads\"} 1"));
    EXPECT_TRUE(has_line(t, "sluice_client_connections_open{upstream=\"backend\"} 2"));
    EXPECT_TRUE(has_line(t, "sluice_client_failed_total{upstream=\"backend\"} 1"));
    EXPECT_TRUE(has_line(t, "sluice_access_log_dropped_total 1"));
    EXPECT_TRUE(has_line(t, "process_resident_memory_bytes 4096"));
    EXPECT_TRUE(has_line(t, "process_threads 3"));
    // Every sample line belongs to a family declared before it (what a parser checks).
    std::string family;
    for (std::size_t at = 0; at < t.size();) {
        const std::size_t end = t.find('\n', at);
        ASSERT_NE(end, std::string::npos) << "the text ends with a newline";
        const std::string line = t.substr(at, end - at);
        at = end + 1;
        if (line.starts_with("# TYPE ")) {
            family = line.substr(7, line.find(' ', 7) - 7);
        } else if (!line.starts_with("# ")) {
            EXPECT_TRUE(!family.empty() && line.starts_with(family)) << line << " outside " << family;
        }
    }
}

TEST(render_metrics, client_pool_gauges_and_failures_by_kind) {
    metrics_snapshot s;
    client_stats api{.failed = 5, .open = 3, .idle = 2, .pending = 4};
    api.failed_by_kind[static_cast<std::size_t>(client_errc::refused) - 1] = 3;
    api.failed_by_kind[static_cast<std::size_t>(client_errc::response_timed_out) - 1] = 2;
    s.clients.push_back({"api", api});
    s.clients.push_back({"db", client_stats{}});
    const std::string t = render_metrics(s);
    EXPECT_TRUE(has_line(t, "# TYPE sluice_client_connections_idle gauge"));
    EXPECT_TRUE(has_line(t, "sluice_client_connections_idle{upstream=\"api\"} 2"));
    EXPECT_TRUE(has_line(t, "sluice_client_connections_idle{upstream=\"db\"} 0"));
    EXPECT_TRUE(has_line(t, "# TYPE sluice_client_calls_pending gauge"));
    EXPECT_TRUE(has_line(t, "sluice_client_calls_pending{upstream=\"api\"} 4"));
    EXPECT_TRUE(has_line(t, "# TYPE sluice_client_failures_total counter"));
    EXPECT_TRUE(has_line(t, "sluice_client_failures_total{upstream=\"api\",kind=\"refused\"} 3"));
    EXPECT_TRUE(has_line(t, "sluice_client_failures_total{upstream=\"api\",kind=\"response_timed_out\"} 2"));
    EXPECT_TRUE(has_line(t, "sluice_client_failures_total{upstream=\"api\",kind=\"cancelled\"} 0"))
        << "every kind is a series from the start, so rate() sees the first failure";
    EXPECT_TRUE(
        has_line(t, "sluice_client_failures_total{upstream=\"db\",kind=\"tls_certificate_rejected\"} 0"));
    EXPECT_EQ(count_of(t, "\nsluice_client_failures_total{upstream=\"api\","), client_errc_count);
    EXPECT_EQ(count_of(t, "# TYPE sluice_client_failures_total "), 1U);
    EXPECT_TRUE(has_line(t, "sluice_client_failed_total{upstream=\"api\"} 5")) << "the total stays";
}

TEST(render_metrics, client_tls_handshakes_and_resumptions) {
    metrics_snapshot s;
    s.clients.push_back({"secure", client_stats{.tls_handshakes = 7, .tls_resumed = 5}});
    const std::string t = render_metrics(s);
    EXPECT_TRUE(has_line(t, "# TYPE sluice_client_tls_handshakes_total counter"));
    EXPECT_TRUE(has_line(t, "sluice_client_tls_handshakes_total{upstream=\"secure\"} 7"));
    EXPECT_TRUE(has_line(t, "# TYPE sluice_client_tls_resumed_total counter"));
    EXPECT_TRUE(has_line(t, "sluice_client_tls_resumed_total{upstream=\"secure\"} 5"));
}

TEST(render_metrics, no_limiter_or_client_families_when_none_is_watched) {
    const std::string t = render_metrics(two_routes());
    EXPECT_EQ(t.find("sluice_limiter_"), std::string::npos);
    EXPECT_EQ(t.find("sluice_client_"), std::string::npos);
    EXPECT_EQ(t.find("sluice_access_log_"), std::string::npos);
}

TEST(request_metrics, buckets_are_upper_bounds_inclusive) {
    request_metrics m(1);
    m.observe(0, "GET", 200, std::chrono::milliseconds(5));    // le 0.005
    m.observe(0, "GET", 200, std::chrono::microseconds(5001)); // le 0.01
    m.observe(0, "HEAD", 304, std::chrono::seconds(11));       // +Inf
    m.observe(7, "GET", 999, std::chrono::milliseconds(1));    // past the routes: unmatched; 5xx
    request_totals t(2);
    m.add_to(t);
    m.add_to(t); // a second loop's figures add up
    EXPECT_EQ(t[0].buckets[0], 2U);
    EXPECT_EQ(t[0].buckets[1], 2U);
    EXPECT_EQ(t[0].buckets[11], 2U);
    EXPECT_EQ(t[0].requests[method_index("GET")][1], 4U);
    EXPECT_EQ(t[0].requests[method_index("HEAD")][2], 2U);
    EXPECT_EQ(t[1].requests[method_index("GET")][4], 2U);
    EXPECT_EQ(t[0].duration_ns, 2U * (5'000'000 + 5'001'000 + 11'000'000'000ULL));
}

} // namespace
} // namespace sluice::detail
