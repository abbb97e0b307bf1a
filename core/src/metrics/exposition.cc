#include "metrics/exposition.h"

#include <fmt/format.h>

#include <cmath>

namespace sluice::detail {

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (const char c : v) {
        switch (c) {
        case '\\':
            out += "\\\\";
            break;
        case '"':
            out += "\\\"";
            break;
        case '\n':
            out += "\\n";
            break;
        default:
            out += c;
        }
    }
    return out;
}

std::string format_metric_value(double v) {
    if (std::isnan(v)) {
        return "NaN";
    }
    if (std::isinf(v)) {
        return v > 0 ? "+Inf" : "-Inf";
    }
    return fmt::format("{}", v);
}

void exposition::family(std::string_view name, std::string_view type, std::string_view help) {
    // HELP text escapes only backslash and line feed (the format's rule for docstrings).
    std::string h;
    for (const char c : help) {
        if (c == '\\') {
            h += "\\\\";
        } else if (c == '\n') {
            h += "\\n";
        } else {
            h += c;
        }
    }
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void exposition::start_sample(std::string_view name, std::initializer_list<metric_label> labels) {
    out_ += name;
    if (labels.size() != 0) {
        out_ += '{';
        bool first = true;
        for (const auto& [k, v] : labels) {
            if (!first) {
                out_ += ',';
            }
            first = false;
            out_ += k;
            out_ += "=\"";
            out_ += escape_label_value(v);
            out_ += '"';
        }
        out_ += '}';
    }
    out_ += ' ';
}

void exposition::sample(std::string_view name, std::initializer_list<metric_label> labels,
                        std::uint64_t value) {
    start_sample(name, labels);
    fmt::format_to(std::back_inserter(out_), "{}\n", value);
}

void exposition::sample(std::string_view name, std::initializer_list<metric_label> labels, double value) {
    start_sample(name, labels);
    out_ += format_metric_value(value);
    out_ += '\n';
}

} // namespace sluice::detail
