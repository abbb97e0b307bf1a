#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

extern char** environ;

namespace sluice::test {

namespace {

// Closes both ends of a pipe on scope exit unless released.
struct pipe_pair {
    int fd[2] = {-1, -1};
    ~pipe_pair() {
        for (int f : fd) {
            if (f >= 0) {
                ::close(f);
            }
        }
    }
};

} // namespace

std::optional<std::string> find_in_path(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::string_view rest = path != nullptr ? path : "/usr/bin:/bin";
    while (!rest.empty()) {
        const auto colon = rest.find(':');
        const std::string dir(rest.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return std::nullopt;
}

process_result run_process(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                           const process_env& env) {
    process_result res;
    if (argv.empty()) {
        res.error = "no program given";
        return res;
    }
    pipe_pair out;
    pipe_pair err;
    if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) {
        res.error = std::string("pipe2: ") + std::strerror(errno);
        return res;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::string_view(*e).rfind("SLUICE_", 0) != 0) {
            env_strings.emplace_back(*e);
        }
    }
    env_strings.insert(env_strings.end(), env.extra.begin(), env.extra.end());
    std::vector<char*> envp;
    envp.reserve(env_strings.size() + 1);
    for (auto& e : env_strings) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        res.error = "cannot start " + argv[0] + ": " + std::strerror(rc);
        return res;
    }
    ::close(out.fd[1]);
    ::close(err.fd[1]);
    out.fd[1] = err.fd[1] = -1;

    const auto deadline = test_clock::now() + timeout;
    pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
    std::string* sinks[2] = {&res.out, &res.err};
    int open_fds = 2;
    while (open_fds > 0) {
        const int n = ::poll(fds, 2, remaining_ms(deadline));
        if (n == 0) {
            res.timed_out = true;
            ::kill(pid, SIGKILL);
            break;
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            char buf[4096];
            const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
            if (got > 0) {
                sinks[i]->append(buf, static_cast<std::size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    // The pipes closed, so the program is ending; still, never wait past the deadline.
    int status = 0;
    while (true) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) {
            break;
        }
        if (w == 0 && test_clock::now() >= deadline) {
            res.timed_out = true;
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            break;
        }
        ::usleep(1000);
    }
    res.exit_code = (!res.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
    return res;
}

} // namespace sluice::test
