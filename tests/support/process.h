// Runs an external program (curl, in the e2e tests) with a deadline: its output is
// collected, and a program that outlives the deadline is killed, so a test never hangs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "support/deadline.h"

namespace sluice::test {

struct process_result {
    int exit_code = -1; ///< the exit status, or -1 when killed by a signal or the deadline
    bool timed_out = false;
    std::string out;
    std::string err;
    std::string error; ///< why the program could not be started
};

/// The child's environment: this process's, without its SLUICE_* variables (so that the
/// tester's own settings cannot leak into a test), plus `extra` ("NAME=value").
struct process_env {
    std::vector<std::string> extra;
};

/// Runs argv[0] (looked up in PATH) with the arguments; stdin is /dev/null.
process_result run_process(const std::vector<std::string>& argv,
                           std::chrono::milliseconds timeout = default_timeout, const process_env& env = {});

/// The full path of a program found in PATH, or nullopt.
std::optional<std::string> find_in_path(const std::string& program);

} // namespace sluice::test
