// What every sample app's main() shares: the exit status and the message of a failed start.
#pragma once

#include <functional>

namespace apps {

/// Runs body and turns what it throws into the apps' exit status: 2 for a sluice::startup_error
/// (its text names the key), 1 for any other exception, each printed as "<name>: <what>".
/// Otherwise body's own return value.
int run_app(const char* name, const std::function<int()>& body);

} // namespace apps
