#include "support/app_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

extern char** environ;

namespace sluice::test {

namespace {

std::string unique_log_path() {
    static std::atomic<int> counter{0};
    return ::testing::TempDir() + "sluice_app_" + std::to_string(::getpid()) + "_" +
           std::to_string(counter.fetch_add(1)) + ".log";
}

} // namespace

app_process::app_process(const std::string& binary, const std::vector<std::string>& args,
                         std::chrono::milliseconds timeout)
    : app_process(binary, args, -1, timeout) {}

app_process::app_process(const std::string& binary, const std::vector<std::string>& args, int listen_fd,
                         std::chrono::milliseconds timeout)
    : log_path_(unique_log_path()) {
    std::vector<std::string> argv{binary, "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string program = binary;
    if (listen_fd >= 0) {
        // LISTEN_PID must be the app's own pid: sh learns it ($$) and execs the app in place.
        argv.insert(argv.begin(), {"/bin/sh", "-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\""});
        program = "/bin/sh";
    }
    std::vector<char*> cargs;
    for (auto& a : argv) {
        cargs.push_back(a.data());
    }
    cargs.push_back(nullptr);
    // The tester's own SLUICE_* settings must not leak into the app.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::string_view(*e).rfind("SLUICE_", 0) != 0) {
            env_strings.emplace_back(*e);
        }
    }
    std::vector<char*> envp;
    for (auto& e : env_strings) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (listen_fd >= 0) {
        posix_spawn_file_actions_adddup2(&actions, listen_fd, 3); // clears close-on-exec on 3
    }
    const int rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, cargs.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        pid_ = -1;
        error_ = "cannot start " + binary + ": " + std::strerror(rc);
        return;
    }
    const bool up = wait_until(
        [&] {
            const std::string text = log();
            const auto at = text.find("(port ");
            if (at == std::string::npos) {
                int status = 0;
                return ::waitpid(pid_, &status, WNOHANG) == pid_ ? (pid_ = -1, true) : false;
            }
            port_ = static_cast<std::uint16_t>(std::stoi(text.substr(at + 6)));
            return true;
        },
        timeout);
    if (!started()) {
        error_ = std::string(up ? "the app exited" : "the app did not report its port in time") +
                 "; its log:\n" + log();
    }
}

app_process::~app_process() {
    stop();
    ::unlink(log_path_.c_str());
}

std::string app_process::log() const {
    std::ifstream in(log_path_);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

int app_process::stop(std::chrono::milliseconds timeout) {
    if (pid_ < 0) {
        return -1;
    }
    ::kill(pid_, SIGTERM);
    int status = 0;
    const bool exited = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!exited) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int app_process::wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ < 0) {
        return -1;
    }
    int status = 0;
    const bool exited = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!exited) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace sluice::test

namespace sluice::test {

std::uint64_t app_process::rss_bytes() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) {
            return std::stoull(line.substr(6)) * 1024; // "VmRSS:    1234 kB"
        }
    }
    return 0;
}

std::uint16_t app_process::admin_port() const {
    const std::string text = log();
    const auto at = text.find("(admin port ");
    return at == std::string::npos ? 0 : static_cast<std::uint16_t>(std::stoi(text.substr(at + 12)));
}

} // namespace sluice::test
