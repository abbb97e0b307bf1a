// The main() of a sluice program, with what a command-line server is expected to do:
//
//   int main(int argc, char** argv) {
//       return sluice::run_main(argc, argv, [](const sluice::config& cfg) {
//           sluice::server srv(cfg);
//           srv.get("/", [](sluice::exchange& ex) { ex.response().text("hello"); });
//           srv.run_until_signal();
//       });
//   }
//
// --help prints the usage (every flag and key) and exits 0 without running `body`; a bad flag,
// key, file or environment variable, or a server that cannot start (a port in use), is one
// line "<program>: <key>: <why>" on stderr and exit status 2; any other exception escaping
// `body` is "<program>: <what>" and status 1. Never an abort from an uncaught exception.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include <sluice/config.h>

namespace sluice {

/// Parses the command line with the process environment (parse_command_line), then runs
/// `body` with the configuration; returns the exit status (above). The program's name in
/// messages is argv[0]'s last path component.
int run_main(int argc, const char* const* argv, const std::function<void(const config&)>& body,
             std::span<const app_option> app_options = {}, std::string_view program_summary = {});

} // namespace sluice
