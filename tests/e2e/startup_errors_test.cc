// Bad input at startup: the real sluice-hello binary, given a bad flag, key, file,
// environment variable, backend or a port in use, exits with status 2 and one line
// that names the key at fault. Never a crash, never a hang (every run has a deadline).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct run_result {
    int exit_code = -1; ///< -1: still running at the deadline (killed)
    std::string err;
    std::string out;
};

// Runs the app with args and extra environment, collects stdout/stderr, and kills it (by
// its PID, which we started) if it has not exited within the deadline.
run_result run_app(const std::vector<std::string>& args, const std::vector<std::string>& env_extra = {},
                   std::chrono::milliseconds deadline = std::chrono::milliseconds(5000)) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
        ADD_FAILURE() << "pipe failed";
        return {};
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    std::vector<std::string> argv_s{SLUICE_HELLO_BIN};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::string(*e).rfind("SLUICE_", 0) != 0) {
            env_s.emplace_back(*e); // the test's own SLUICE_* variables must not leak in
        }
    }
    env_s.insert(env_s.end(), env_extra.begin(), env_extra.end());
    std::vector<char*> envp;
    for (auto& e : env_s) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    run_result r;
    if (rc != 0) {
        ADD_FAILURE() << "cannot start " << SLUICE_HELLO_BIN;
        ::close(out_pipe[0]);
        ::close(err_pipe[0]);
        return r;
    }
    const auto end = std::chrono::steady_clock::now() + deadline;
    pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            break;
        }
        if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) {
            continue;
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP)) != 0) {
                char buf[4096];
                const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
                if (n <= 0) {
                    ::close(fds[i].fd);
                    fds[i].fd = -1;
                    --open_fds;
                } else {
                    (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
                }
            }
        }
    }
    // Its output has ended; the process itself may take a moment more to exit.
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < end) {
        ::usleep(2000);
    }
    if (done == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        r.exit_code = -1;
    } else {
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    for (auto& f : fds) {
        if (f.fd >= 0) {
            ::close(f.fd);
        }
    }
    return r;
}

std::string temp_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "sluice_" + name;
    std::ofstream(path) << text;
    return path;
}

// A listening socket on a free loopback port, held by the test.
struct held_port {
    int fd = -1;
    std::uint16_t port = 0;
    explicit held_port(bool reuseport) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        if (reuseport) {
            ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
            ADD_FAILURE() << "cannot hold a port";
        }
        port = ntohs(a.sin_port);
    }
    ~held_port() { ::close(fd); }
    held_port(const held_port&) = delete;
    held_port& operator=(const held_port&) = delete;
};

void expect_startup_error(const run_result& r, const std::string& key_prefix, const std::string& detail) {
    EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
    EXPECT_NE(r.err.find("sluice-hello: " + key_prefix), std::string::npos) << "stderr: " << r.err;
    EXPECT_NE(r.err.find(detail), std::string::npos) << "stderr: " << r.err;
}

TEST(startup_errors, help_prints_usage_and_exits_0) {
    const auto r = run_app({"--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--backend"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--set"), std::string::npos) << r.out;
}

TEST(startup_errors, unknown_backend_lists_the_known_ones) {
    const auto r = run_app({"--backend", "nosuch", "--listen", "127.0.0.1:0"});
    expect_startup_error(r, "backend: ", "unknown backend \"nosuch\"");
    EXPECT_NE(r.err.find("epoll"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("blocking"), std::string::npos) << r.err;
}

TEST(startup_errors, bad_flag_values_name_their_key) {
    expect_startup_error(run_app({"--io-threads", "abc"}), "io_threads", "abc");
    expect_startup_error(run_app({"--dispatch", "sometimes"}), "dispatch", "sometimes");
    expect_startup_error(run_app({"--set", "limits.max_body_bytes=12abc"}), "limits.max_body_bytes", "12abc");
    expect_startup_error(run_app({"--set", "limits.nosuch=1"}), "limits.nosuch", "unknown");
    expect_startup_error(run_app({"--listen", "localhost"}), "listen", "localhost");
}

TEST(startup_errors, unknown_flag_is_named) {
    const auto r = run_app({"--frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
}

TEST(startup_errors, bad_environment_variable_is_named) {
    expect_startup_error(run_app({}, {"SLUICE_IO_THREADS=0"}), "io_threads", "");
    const auto r = run_app({}, {"SLUICE_NO_SUCH_KEY=1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("SLUICE_NO_SUCH_KEY"), std::string::npos) << r.err;
}

TEST(startup_errors, config_files_missing_malformed_or_with_unknown_keys) {
    const auto missing = run_app({"--config", "/nonexistent/sluice.toml"});
    EXPECT_EQ(missing.exit_code, 2);
    EXPECT_NE(missing.err.find("/nonexistent/sluice.toml"), std::string::npos) << missing.err;

    const auto syntax = temp_file("syntax.toml", "backend = \"epoll\"\nio_threads = = 2\n");
    const auto s = run_app({"--config", syntax});
    EXPECT_EQ(s.exit_code, 2);
    EXPECT_NE(s.err.find("syntax.toml:2"), std::string::npos) << "the line of the error: " << s.err;

    const auto unknown = temp_file("unknown.toml", "[limits]\nmax_bodee_bytes = 10\n");
    expect_startup_error(run_app({"--config", unknown}), "limits.max_bodee_bytes", "");

    const auto wrong_type = temp_file("type.toml", "io_threads = \"two\"\n");
    expect_startup_error(run_app({"--config", wrong_type}), "io_threads", "");
}

TEST(startup_errors, port_in_use_is_a_listen_error) {
    held_port held(false);
    const std::string listen = "127.0.0.1:" + std::to_string(held.port);
    for (const char* backend : {"epoll", "blocking"}) {
        SCOPED_TRACE(backend);
        expect_startup_error(run_app({"--backend", backend, "--listen", listen}), "listen: ",
                             "Address already in use");
    }
}

TEST(startup_errors, port_held_with_reuseport_is_not_silently_shared_by_several_loops) {
    // SO_REUSEPORT (used for io_threads > 1) would let a second server join this port.
    held_port held(true);
    const std::string listen = "127.0.0.1:" + std::to_string(held.port);
    expect_startup_error(run_app({"--backend", "epoll", "--io-threads", "2", "--listen", listen}), "listen: ",
                         "Address already in use");
}

} // namespace
