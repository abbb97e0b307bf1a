// A sample app (sluice-slow-backend, sluice-fastio, ...) started as a real process for the
// end-to-end tests: bound to 127.0.0.1:0, its port read from its startup log line, and
// stopped with SIGTERM (SIGKILL past a deadline) when the object goes, so no test leaves it
// running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "support/deadline.h"

namespace sluice::test {

class app_process {
public:
    /// Starts `binary --listen 127.0.0.1:0 args...` with stdout/stderr to a log file, and waits
    /// (up to `timeout`) for its "listening on ... (port N)" line. Check started() / error().
    app_process(const std::string& binary, const std::vector<std::string>& args,
                std::chrono::milliseconds timeout = default_timeout);
    /// The same, started as systemd socket activation starts a service: `listen_fd` becomes
    /// its descriptor 3, with LISTEN_FDS=1 and LISTEN_PID set to its pid (through sh's exec).
    app_process(const std::string& binary, const std::vector<std::string>& args, int listen_fd,
                std::chrono::milliseconds timeout = default_timeout);
    ~app_process();
    app_process(const app_process&) = delete;
    app_process& operator=(const app_process&) = delete;

    bool started() const noexcept { return port_ != 0; }
    std::uint16_t port() const noexcept { return port_; }
    /// The admin listener's port from its "(admin port N)" line (admin.listen set), or 0.
    std::uint16_t admin_port() const;
    pid_t pid() const noexcept { return pid_; }
    /// The process's resident set (VmRSS) in bytes; 0 if it cannot be read.
    std::uint64_t rss_bytes() const;
    const std::string& error() const noexcept { return error_; }
    /// Everything the app logged so far.
    std::string log() const;

    /// SIGTERM, then waits up to `timeout` (SIGKILL after it). Returns the exit status, or -1
    /// when it had to be killed.
    int stop(std::chrono::milliseconds timeout = default_timeout);
    /// Waits up to `timeout` for the process to exit on its own (after a hand-over, say);
    /// the exit status, or -1 when it did not exit (it is then killed) or was killed.
    int wait_exit(std::chrono::milliseconds timeout = default_timeout);

private:
    pid_t pid_ = -1;
    std::uint16_t port_ = 0;
    std::string log_path_;
    std::string error_;
};

} // namespace sluice::test
