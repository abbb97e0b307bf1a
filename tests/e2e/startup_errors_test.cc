// Bad input at startup: the real sluice-hello binary, given a bad flag, key, file,
// environment variable, backend or a port in use, exits with status 2 and one line
// that names the key at fault. Never a crash, never a hang (every run has a deadline).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/test_certs.h"

namespace {

using sluice::test::process_result;

// The app with args and extra environment, with a deadline (a server that starts would run
// until killed: that is a failure here).
process_result run_app(const std::vector<std::string>& args, const std::vector<std::string>& env_extra = {}) {
    std::vector<std::string> argv{SLUICE_HELLO_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return sluice::test::run_process(argv, std::chrono::milliseconds(5000), {env_extra});
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

void expect_startup_error(const process_result& r, const std::string& key_prefix, const std::string& detail) {
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

TEST(startup_errors, tls_files_that_are_not_pem_name_the_key_and_the_file) {
    const auto cert = temp_file("cert.pem", "not a certificate");
    const auto key = temp_file("key.pem", "not a key");
    expect_startup_error(
        run_app({"--listen", "127.0.0.1:0", "--set", "tls.cert=" + cert, "--set", "tls.key=" + key}),
        "tls.cert: ", "'" + cert + "' is not a PEM certificate chain");
    expect_startup_error(run_app({"--listen", "127.0.0.1:0", "--set", "tls.cert=/nonexistent/c.pem", "--set",
                                  "tls.key=" + key}),
                         "tls.cert: ", "cannot open '/nonexistent/c.pem'");
}

// A FIFO nobody writes to (or reads from) where a file is expected: open() would wait for the
// other end for ever, after SIGTERM is blocked (run_until_signal), so the server could only be
// killed. Each is a startup error naming the key instead, at once.
std::string temp_fifo(const std::string& name) {
    const std::string path = ::testing::TempDir() + "sluice_" + name;
    ::unlink(path.c_str());
    if (::mkfifo(path.c_str(), 0600) != 0) {
        ADD_FAILURE() << "cannot make a FIFO at " << path;
    }
    return path;
}

TEST(startup_errors, a_fifo_for_a_tls_file_is_not_a_regular_file) {
    const sluice::test::test_certs certs;
    const auto fifo = temp_fifo("tls.fifo");
    expect_startup_error(run_app({"--listen", "127.0.0.1:0", "--set", "tls.cert=" + fifo, "--set",
                                  "tls.key=" + certs.key_path()}),
                         "tls.cert: ", "'" + fifo + "' is not a regular file");
    expect_startup_error(run_app({"--listen", "127.0.0.1:0", "--set", "tls.cert=" + certs.cert_path(),
                                  "--set", "tls.key=" + fifo}),
                         "tls.key: ", "'" + fifo + "' is not a regular file");
    expect_startup_error(run_app({"--listen", "127.0.0.1:0", "--set", "tls.cert=" + certs.cert_path(),
                                  "--set", "tls.key=" + certs.key_path(), "--set", "tls.client_ca=" + fifo,
                                  "--set", "tls.verify_client=require"}),
                         "tls.client_ca: ", "'" + fifo + "' is not a regular file");
    ::unlink(fifo.c_str());
}

TEST(startup_errors, a_fifo_without_a_reader_for_the_access_log_is_named) {
    const auto fifo = temp_fifo("access.fifo");
    expect_startup_error(run_app({"--listen", "127.0.0.1:0", "--set", "access_log.path=" + fifo}),
                         "access_log.path: ", "a FIFO with no reader");
    ::unlink(fifo.c_str());
}

TEST(startup_errors, a_fifo_for_the_config_file_is_not_a_regular_file) {
    const auto fifo = temp_fifo("config.fifo");
    const auto r = run_app({"--config", fifo});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("'" + fifo + "': not a regular file"), std::string::npos) << r.err;
    ::unlink(fifo.c_str());
}

TEST(startup_errors, port_in_use_is_a_listen_error) {
    held_port held(false);
    const std::string listen = "127.0.0.1:" + std::to_string(held.port);
    for (const char* backend : {"epoll", "blocking"}) {
        SCOPED_TRACE(backend);
        expect_startup_error(run_app({"--backend", backend, "--listen", listen}),
                             "listen: ", "Address already in use");
    }
}

TEST(startup_errors, admin_port_in_use_names_admin_listen_once) {
    held_port held(false);
    const auto r =
        run_app({"--listen", "127.0.0.1:0", "--set", "admin.listen=127.0.0.1:" + std::to_string(held.port)});
    expect_startup_error(r, "admin.listen: cannot listen on ", "Address already in use");
    EXPECT_EQ(r.err.find("admin.listen: listen: "), std::string::npos) << "stderr: " << r.err;
}

TEST(startup_errors, port_held_with_reuseport_is_not_silently_shared_by_several_loops) {
    // SO_REUSEPORT (used for io_threads > 1) would let a second server join this port.
    held_port held(true);
    const std::string listen = "127.0.0.1:" + std::to_string(held.port);
    expect_startup_error(run_app({"--backend", "epoll", "--io-threads", "2", "--listen", listen}),
                         "listen: ", "Address already in use");
}

} // namespace
