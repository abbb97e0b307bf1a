// Deadlines for tests: every wait in the test tree has one, so a broken server makes a test
// fail with a message instead of hanging the suite.
#pragma once

#include <chrono>
#include <functional>

namespace sluice::test {

using test_clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// The default bound on any single wait (a response, a close, a condition).
inline constexpr std::chrono::milliseconds default_timeout = 5s;

/// Polls pred every few milliseconds until it holds or timeout passes; returns its last value.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = default_timeout);

/// Milliseconds left until deadline, clamped to [0, INT_MAX] for poll().
int remaining_ms(test_clock::time_point deadline) noexcept;

} // namespace sluice::test
