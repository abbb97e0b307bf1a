// A thread-safe log sink: tests assert on what the server logged (the watchdog, errors).
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/log.h>

#include "support/deadline.h"

namespace sluice::test {

class log_capture {
public:
    struct line {
        log_level level;
        std::string text;
    };

    /// Records one line; also echoes it to stderr when SLUICE_TEST_LOG is set.
    void record(log_level level, std::string_view text);

    std::vector<line> lines() const;
    /// How many lines contain `text`.
    std::size_t count(std::string_view text) const;
    bool contains(std::string_view text) const { return count(text) > 0; }
    /// Waits until some line contains `text`.
    bool wait_for(std::string_view text, std::chrono::milliseconds timeout = default_timeout) const;

private:
    mutable std::mutex mu_;
    std::vector<line> lines_;
};

} // namespace sluice::test
