// Helpers shared by the configuration tests: catching a startup_error, a fake environment,
// temporary config files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/config.h>
#include <sluice/error.h>

namespace sluice::testing {

/// Runs f and returns the startup_error it throws; records a failure (and returns an error with
/// key "<none>") when it throws nothing or something else.
template <class F>
startup_error catch_startup_error(F&& f) {
    try {
        f();
    } catch (const startup_error& e) {
        return e;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected startup_error, got another exception: " << e.what();
        return {"<other>", ""};
    }
    ADD_FAILURE() << "expected startup_error, nothing was thrown";
    return {"<none>", ""};
}

inline ::testing::AssertionResult contains(std::string_view text, std::string_view part) {
    if (text.find(part) != std::string_view::npos) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

/// An environment as parse_command_line wants it: "NAME=value" strings.
class fake_env {
public:
    fake_env(std::initializer_list<std::string> entries) : entries_(entries) {
        for (const std::string& e : entries_) {
            pointers_.push_back(e.c_str());
        }
    }
    std::span<const char* const> span() const { return pointers_; }

private:
    std::vector<std::string> entries_;
    std::vector<const char*> pointers_;
};

/// argv for parse_command_line, with a program name in front.
class fake_argv {
public:
    fake_argv(std::initializer_list<std::string> args) : args_{"/usr/bin/sluice-test"} {
        args_.insert(args_.end(), args.begin(), args.end());
        for (const std::string& a : args_) {
            pointers_.push_back(a.c_str());
        }
        pointers_.push_back(nullptr);
    }
    int argc() const { return static_cast<int>(args_.size()); }
    const char* const* argv() const { return pointers_.data(); }

private:
    std::vector<std::string> args_;
    std::vector<const char*> pointers_;
};

/// A file with the given contents, deleted at the end of the test.
class temp_file {
public:
    explicit temp_file(std::string_view contents) {
        std::string pattern = ::testing::TempDir() + "sluice-config-XXXXXX";
        const int fd = ::mkstemp(pattern.data());
        if (fd < 0) {
            ADD_FAILURE() << "mkstemp failed";
            return;
        }
        path_ = pattern;
        std::size_t done = 0;
        while (done < contents.size()) {
            const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
            if (n <= 0) {
                ADD_FAILURE() << "write failed";
                break;
            }
            done += static_cast<std::size_t>(n);
        }
        ::close(fd);
    }
    ~temp_file() {
        if (!path_.empty()) {
            std::remove(path_.c_str());
        }
    }
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;

    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// One non-default value for every key, in text form (env, flags) and as a TOML literal, with
/// a check that it arrived. The config tests cover each source with this list, and one test
/// checks that it names exactly the keys describe_config() knows.
struct key_case {
    std::string_view key;
    std::string_view text;
    std::string_view toml;
    bool (*arrived)(const config&);
};

inline const std::vector<key_case>& every_key() {
    static const std::vector<key_case> cases = {
        {"backend", "epoll", "\"epoll\"", [](const config& c) { return c.backend == "epoll"; }},
        {"listen", "[::1]:9090", "\"[::1]:9090\"", [](const config& c) { return c.listen == "[::1]:9090"; }},
        {"io_threads", "4", "4", [](const config& c) { return c.io_threads == 4; }},
        {"dispatch", "pool", "\"pool\"", [](const config& c) { return c.dispatch == dispatch_mode::pool; }},
        {"worker_threads", "16", "16", [](const config& c) { return c.worker_threads == 16; }},
        {"async_timeout_ms", "1500", "1500", [](const config& c) { return c.async_timeout_ms == 1500; }},
        {"watchdog_ms", "0", "0", [](const config& c) { return c.watchdog_ms == 0; }},
        {"shutdown_timeout_ms", "2500", "2500",
         [](const config& c) { return c.shutdown_timeout_ms == 2500; }},
        {"shutdown_delay_ms", "3000", "3000", [](const config& c) { return c.shutdown_delay_ms == 3000; }},
        {"log_level", "debug", "\"debug\"", [](const config& c) { return c.log == log_level::debug; }},
        {"blocking.threads", "300", "300", [](const config& c) { return c.blocking.threads == 300; }},
        {"blocking.accept_queue", "7", "7", [](const config& c) { return c.blocking.accept_queue == 7; }},
        {"limits.max_header_bytes", "16384", "16384",
         [](const config& c) { return c.limits.max_header_bytes == 16384; }},
        {"limits.max_body_bytes", "0", "0", [](const config& c) { return c.limits.max_body_bytes == 0; }},
        {"limits.header_timeout_ms", "1", "1",
         [](const config& c) { return c.limits.header_timeout_ms == 1; }},
        {"limits.body_timeout_ms", "2", "2", [](const config& c) { return c.limits.body_timeout_ms == 2; }},
        {"limits.idle_timeout_ms", "3", "3", [](const config& c) { return c.limits.idle_timeout_ms == 3; }},
        {"limits.write_timeout_ms", "4", "4", [](const config& c) { return c.limits.write_timeout_ms == 4; }},
        {"limits.min_send_rate", "0", "0", [](const config& c) { return c.limits.min_send_rate == 0; }},
        {"limits.lingering_timeout_ms", "0", "0",
         [](const config& c) { return c.limits.lingering_timeout_ms == 0; }},
        {"limits.max_connections", "1000000", "1000000",
         [](const config& c) { return c.limits.max_connections == 1'000'000; }},
        {"limits.max_keepalive_requests", "100", "100",
         [](const config& c) { return c.limits.max_keepalive_requests == 100; }},
        {"tls.cert", "/etc/sluice/cert.pem", "\"/etc/sluice/cert.pem\"",
         [](const config& c) { return c.tls.cert == "/etc/sluice/cert.pem"; }},
        {"tls.key", "/etc/sluice/key.pem", "\"/etc/sluice/key.pem\"",
         [](const config& c) { return c.tls.key == "/etc/sluice/key.pem"; }},
        {"admin.listen", "127.0.0.1:9901", "\"127.0.0.1:9901\"",
         [](const config& c) { return c.admin.listen == "127.0.0.1:9901"; }},
        {"access_log.path", "-", "\"-\"", [](const config& c) { return c.access_log.path == "-"; }},
        {"handover_socket", "/run/app/handover.sock", "\"/run/app/handover.sock\"",
         [](const config& c) { return c.handover_socket == "/run/app/handover.sock"; }},
        {"access_log.format", "json", "\"json\"",
         [](const config& c) { return c.access_log.format == "json"; }},
        {"access_log.queue_lines", "1024", "1024",
         [](const config& c) { return c.access_log.queue_lines == 1024; }},
        {"tls.min_version", "1.3", "\"1.3\"", [](const config& c) { return c.tls.min_version == "1.3"; }},
        {"tls.ciphers", "ECDHE+AESGCM", "\"ECDHE+AESGCM\"",
         [](const config& c) { return c.tls.ciphers == "ECDHE+AESGCM"; }},
        {"tls.ciphersuites", "TLS_AES_128_GCM_SHA256", "\"TLS_AES_128_GCM_SHA256\"",
         [](const config& c) { return c.tls.ciphersuites == "TLS_AES_128_GCM_SHA256"; }},
        {"tls.handshake_timeout_ms", "2500", "2500",
         [](const config& c) { return c.tls.handshake_timeout_ms == 2500; }},
        {"tls.client_ca", "/etc/sluice/clients.pem", "\"/etc/sluice/clients.pem\"",
         [](const config& c) { return c.tls.client_ca == "/etc/sluice/clients.pem"; }},
        {"tls.verify_client", "require", "\"require\"",
         [](const config& c) { return c.tls.verify_client == tls_verify_client::require; }},
        {"tls.ktls", "true", "true", [](const config& c) { return c.tls.ktls; }},
        {"tls.listen", "127.0.0.1:8443", "\"127.0.0.1:8443\"",
         [](const config& c) { return c.tls.listen == "127.0.0.1:8443"; }},
    };
    return cases;
}

/// "limits.max_body_bytes" -> "SLUICE_LIMITS_MAX_BODY_BYTES", written out independently of the
/// implementation so the test pins the documented naming rule.
inline std::string env_var_for(std::string_view key) {
    std::string out = "SLUICE_";
    for (const char c : key) {
        out += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

} // namespace sluice::testing
