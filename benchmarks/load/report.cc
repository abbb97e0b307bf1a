#include "report.h"

#include <fmt/format.h>

namespace sluice::load {

namespace {

std::string json_escape(const std::string& s) {
    std::string r;
    for (char c : s) {
        if (c == '"' || c == '\\') {
            r += '\\';
            r += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            r += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
            r += c;
        }
    }
    return r;
}

std::string csv_field(const std::string& s) {
    std::string r = "\"";
    for (char c : s) {
        r += c;
        if (c == '"') {
            r += '"';
        }
    }
    return r + "\"";
}

std::uint64_t errors_of(const summary& s, error_kind k) {
    return s.errors[static_cast<std::size_t>(k)];
}

} // namespace

void print_report(std::ostream& out, const summary& s, const load_options& o) {
    const auto connect = errors_of(s, error_kind::connect), timeout = errors_of(s, error_kind::timeout),
               reset = errors_of(s, error_kind::reset), non2xx = errors_of(s, error_kind::non_2xx),
               other = errors_of(s, error_kind::other);
    auto pct = [&](std::uint64_t n) {
        return s.samples ? 100.0 * static_cast<double>(n) / static_cast<double>(s.samples) : 0.0;
    };
    switch (o.format) {
    case output_format::json:
        out << fmt::format(
            "{{\"label\":\"{}\",\"users\":{},\"samples\":{},\"avg_ms\":{:.3f},\"min_ms\":{:.3f},\"max_ms\":{:"
            ".3f},"
            "\"stddev_ms\":{:.3f},\"p50_ms\":{:.3f},\"p90_ms\":{:.3f},\"p95_ms\":{:.3f},\"p99_ms\":{:.3f},"
            "\"errors\":{},\"error_pct\":{:.4f},\"errors_by_kind\":{{\"connect\":{},\"timeout\":{},\"reset\":"
            "{},"
            "\"non_2xx\":{},\"other\":{}}},\"elapsed_s\":{:.3f},\"throughput\":{:.2f},\"window_start_s\":{:."
            "3f},"
            "\"window_end_s\":{:.3f},\"window_samples\":{},\"window_throughput\":{:.2f},\"received_kbps\":{:."
            "2f},"
            "\"sent_kbps\":{:.2f}}}\n",
            json_escape(o.label), o.users, s.samples, s.avg_ms, s.min_ms, s.max_ms, s.stddev_ms, s.p50_ms,
            s.p90_ms, s.p95_ms, s.p99_ms, s.error_count, s.error_pct, connect, timeout, reset, non2xx, other,
            s.elapsed_s, s.throughput, s.window_start_s, s.window_end_s, s.window_samples,
            s.window_throughput, s.received_kbps, s.sent_kbps);
        return;
    case output_format::csv:
        out << "label,users,samples,avg_ms,min_ms,max_ms,stddev_ms,p50_ms,p90_ms,p95_ms,p99_ms,error_pct,"
               "connect_errors,timeout_errors,reset_errors,non_2xx,other_errors,elapsed_s,throughput,"
               "window_throughput,received_kbps,sent_kbps\n";
        out << fmt::format(
            "{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{},{},{},{},{},"
            "{:.3f},{:.2f},{:.2f},{:.2f},{:.2f}\n",
            csv_field(o.label), o.users, s.samples, s.avg_ms, s.min_ms, s.max_ms, s.stddev_ms, s.p50_ms,
            s.p90_ms, s.p95_ms, s.p99_ms, s.error_pct, connect, timeout, reset, non2xx, other, s.elapsed_s,
            s.throughput, s.window_throughput, s.received_kbps, s.sent_kbps);
        return;
    case output_format::text:
        break;
    }
    out << fmt::format("Summary Report: {} ({} users)\n", o.label, o.users);
    out << fmt::format("  samples      {}\n", s.samples);
    out << fmt::format("  latency ms   avg {:.2f}  min {:.2f}  max {:.2f}  std dev {:.2f}\n", s.avg_ms,
                       s.min_ms, s.max_ms, s.stddev_ms);
    out << fmt::format("  percentiles  p50 {:.2f}  p90 {:.2f}  p95 {:.2f}  p99 {:.2f} ms\n", s.p50_ms,
                       s.p90_ms, s.p95_ms, s.p99_ms);
    out << fmt::format(
        "  errors       {:.3f}% ({}): connect {:.3f}%  timeout {:.3f}%  reset {:.3f}%  non-2xx "
        "{:.3f}%  other {:.3f}%\n",
        s.error_pct, s.error_count, pct(connect), pct(timeout), pct(reset), pct(non2xx), pct(other));
    out << fmt::format(
        "  throughput   {:.1f}/s over {:.2f} s; steady window {:.1f}-{:.1f} s: {:.1f}/s ({} samples)\n",
        s.throughput, s.elapsed_s, s.window_start_s, s.window_end_s, s.window_throughput, s.window_samples);
    out << fmt::format("  KB/s         received {:.1f}  sent {:.1f}\n", s.received_kbps, s.sent_kbps);
}

} // namespace sluice::load
