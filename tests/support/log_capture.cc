#include "support/log_capture.h"

#include <cstdio>
#include <cstdlib>

namespace sluice::test {

void log_capture::record(log_level level, std::string_view text) {
    static const bool echo = std::getenv("SLUICE_TEST_LOG") != nullptr;
    if (echo) {
        std::fprintf(stderr, "[server %.*s] %.*s\n", static_cast<int>(to_string(level).size()),
                     to_string(level).data(), static_cast<int>(text.size()), text.data());
    }
    std::lock_guard lock(mu_);
    lines_.push_back({level, std::string(text)});
}

std::vector<log_capture::line> log_capture::lines() const {
    std::lock_guard lock(mu_);
    return lines_;
}

std::size_t log_capture::count(std::string_view text) const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& l : lines_) {
        if (l.text.find(text) != std::string::npos) {
            ++n;
        }
    }
    return n;
}

bool log_capture::wait_for(std::string_view text, std::chrono::milliseconds timeout) const {
    return wait_until([&] { return contains(text); }, timeout);
}

} // namespace sluice::test
