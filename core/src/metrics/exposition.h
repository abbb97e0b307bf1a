// The Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): "# HELP" and "# TYPE" once
// per family, then one line per sample, `name{label="value",...} value`.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::detail {

using metric_label = std::pair<std::string_view, std::string_view>;

class exposition {
public:
    /// Starts a family: type is "counter", "gauge" or "histogram".
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, std::initializer_list<metric_label> labels, std::uint64_t value);
    void sample(std::string_view name, std::initializer_list<metric_label> labels, double value);
    void sample(std::string_view name, std::uint64_t value) { sample(name, {}, value); }
    /// A family of one unlabelled sample (most process and server figures).
    void single(std::string_view name, std::string_view type, std::string_view help, std::uint64_t value) {
        family(name, type, help);
        sample(name, value);
    }

    const std::string& text() const noexcept { return out_; }
    std::string take() noexcept { return std::move(out_); }

private:
    void start_sample(std::string_view name, std::initializer_list<metric_label> labels);

    std::string out_;
};

/// A label value escaped as the format asks: backslash, double quote and line feed.
std::string escape_label_value(std::string_view v);
/// A sample value: integers exactly, "+Inf", "-Inf", "NaN", else the shortest round-trip form.
std::string format_metric_value(double v);

} // namespace sluice::detail
