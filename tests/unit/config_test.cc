// The key table through set_config_value(), the environment, validation, parse_listen() and
// describe_config(). The TOML file and the command line have their own test files.

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_test_helpers.h"

namespace sluice {
namespace {

using testing::catch_startup_error;
using testing::contains;
using testing::every_key;
using testing::fake_env;

TEST(config, every_key_set_by_text) {
    for (const auto& k : every_key()) {
        config cfg;
        ASSERT_FALSE(k.arrived(cfg)) << k.key << ": the test value must differ from the default";
        set_config_value(cfg, k.key, k.text);
        EXPECT_TRUE(k.arrived(cfg)) << k.key;
    }
}

TEST(config, every_key_set_by_environment) {
    std::vector<std::string> entries;
    for (const auto& k : every_key()) {
        entries.push_back(testing::env_var_for(k.key) + "=" + std::string(k.text));
    }
    std::vector<const char*> env;
    for (const auto& e : entries) {
        env.push_back(e.c_str());
    }
    config cfg;
    apply_config_env(cfg, env);
    for (const auto& k : every_key()) {
        EXPECT_TRUE(k.arrived(cfg)) << k.key;
    }
}

TEST(config, test_list_covers_every_key_describe_config_knows) {
    std::set<std::string> described;
    std::istringstream lines(describe_config(config{}));
    for (std::string line; std::getline(lines, line);) {
        described.insert(line.substr(0, line.find(" = ")));
    }
    std::set<std::string> tested;
    for (const auto& k : every_key()) {
        tested.insert(std::string(k.key));
    }
    EXPECT_EQ(described, tested);
    EXPECT_EQ(described.size(), 37U);
}

TEST(config, defaults_are_documented_values) {
    const config cfg;
    EXPECT_EQ(cfg.backend, "auto");
    EXPECT_EQ(cfg.listen, "127.0.0.1:8080");
    EXPECT_EQ(cfg.dispatch, dispatch_mode::inline_io);
    EXPECT_EQ(cfg.log, log_level::info);
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config, unknown_key_is_named_with_a_suggestion) {
    config cfg;
    const auto e = catch_startup_error([&] { set_config_value(cfg, "io_thread", "2"); });
    EXPECT_EQ(e.key(), "io_thread");
    EXPECT_TRUE(contains(e.what(), "unknown configuration key"));
    EXPECT_TRUE(contains(e.what(), "did you mean 'io_threads'"));

    const auto far = catch_startup_error([&] { set_config_value(cfg, "completely_different", "2"); });
    EXPECT_EQ(far.key(), "completely_different");
    EXPECT_FALSE(contains(far.what(), "did you mean"));
    // A table is not a key.
    EXPECT_EQ(catch_startup_error([&] { set_config_value(cfg, "limits", "2"); }).key(), "limits");
}

struct bad_value {
    std::string_view key;
    std::string_view value;
    std::string_view message; ///< a part of the message
};

class config_bad_value : public ::testing::TestWithParam<bad_value> {};

TEST_P(config_bad_value, is_a_startup_error_naming_the_key) {
    const bad_value& p = GetParam();
    config cfg;
    const std::string before = describe_config(cfg);
    const auto e = catch_startup_error([&] { set_config_value(cfg, p.key, p.value); });
    EXPECT_EQ(e.key(), p.key);
    EXPECT_TRUE(contains(e.what(), std::string(p.key) + ": "));
    EXPECT_TRUE(contains(e.what(), p.message));
    EXPECT_EQ(describe_config(cfg), before) << "a rejected value must leave the config alone";
}

INSTANTIATE_TEST_SUITE_P(
    integers, config_bad_value,
    ::testing::Values(bad_value{"io_threads", "0", "must be between 1 and 256, got 0"},
                      bad_value{"io_threads", "257", "must be between 1 and 256, got 257"},
                      bad_value{"io_threads", "12abc", "unexpected 'abc' after the number in '12abc'"},
                      bad_value{"io_threads", "-1", "must not be negative"},
                      bad_value{"io_threads", "", "expected a non-negative integer, got ''"},
                      bad_value{"io_threads", " 4", "expected a non-negative integer"},
                      bad_value{"io_threads", "+4", "expected a non-negative integer"},
                      bad_value{"io_threads", "4 ", "unexpected ' '"},
                      bad_value{"io_threads", "1.5", "unexpected '.5'"},
                      bad_value{"io_threads", "0x10", "unexpected 'x10'"},
                      bad_value{"io_threads", "99999999999999999999999", "must be between 1 and 256"},
                      bad_value{"worker_threads", "0", "between 1 and 4096"},
                      bad_value{"worker_threads", "4097", "between 1 and 4096"},
                      bad_value{"async_timeout_ms", "0", "between 1 and 86400000"},
                      bad_value{"async_timeout_ms", "86400001", "between 1 and 86400000"},
                      bad_value{"watchdog_ms", "86400001", "at most 86400000"},
                      bad_value{"blocking.threads", "0", "between 1 and 20000"},
                      bad_value{"blocking.threads", "20001", "between 1 and 20000"},
                      bad_value{"blocking.accept_queue", "1000001", "at most 1000000"},
                      bad_value{"limits.max_header_bytes", "255", "between 256 and 1048576"},
                      bad_value{"limits.max_header_bytes", "1048577", "between 256 and 1048576"},
                      bad_value{"limits.max_body_bytes", "1073741825", "at most 1073741824"},
                      bad_value{"limits.max_body_bytes", "-5", "must not be negative"},
                      bad_value{"limits.header_timeout_ms", "0", "between 1 and"},
                      bad_value{"limits.body_timeout_ms", "0", "between 1 and"},
                      bad_value{"limits.idle_timeout_ms", "0", "between 1 and"},
                      bad_value{"limits.write_timeout_ms", "0", "between 1 and"},
                      bad_value{"limits.min_send_rate", "1073741825", "at most 1073741824"},
                      bad_value{"limits.min_send_rate", "-1", "must not be negative"},
                      bad_value{"limits.lingering_timeout_ms", "-1", "must not be negative"},
                      bad_value{"limits.lingering_timeout_ms", "86400001", "at most 86400000"},
                      bad_value{"limits.max_connections", "0", "between 1 and 1000000"},
                      bad_value{"limits.max_connections", "1000001", "between 1 and 1000000"},
                      bad_value{"limits.max_keepalive_requests", "4294967296", "at most 4294967295"}));

INSTANTIATE_TEST_SUITE_P(
    words, config_bad_value,
    ::testing::Values(bad_value{"dispatch", "threads", "must be 'inline' or 'pool', got 'threads'"},
                      bad_value{"dispatch", "", "must be 'inline' or 'pool'"},
                      bad_value{"dispatch", "Pool", "must be 'inline' or 'pool'"},
                      bad_value{"log_level", "verbose", "must be one of error, warn, info, debug"},
                      bad_value{"log_level", "INFO", "must be one of error, warn, info, debug"},
                      bad_value{"backend", "", "must be a backend name"},
                      bad_value{"backend", "9lives", "must be a backend name"},
                      bad_value{"backend", "ep oll", "must be a backend name"},
                      bad_value{"tls.cert", "/etc/a\nb", "without control characters, got '/etc/a\\x0ab'"},
                      bad_value{"tls.key", "\t", "without control characters"},
                      // Not UTF-8: a TOML file cannot hold it, so describe_config() could not
                      // print it as one (found by tests/fuzz/config).
                      bad_value{"tls.cert", "/etc/\xff.pem", "must be UTF-8"},
                      bad_value{"tls.key", "\xc0\xaf", "must be UTF-8"},     // overlong '/'
                      bad_value{"tls.key", "\xed\xa0\x80", "must be UTF-8"}, // a surrogate
                      bad_value{"tls.cert", "a\xe2\x82", "must be UTF-8"},   // cut short
                      bad_value{"tls.min_version", "1.1", "must be '1.2' or '1.3', got '1.1'"},
                      bad_value{"tls.min_version", "TLSv1.2", "must be '1.2' or '1.3'"},
                      bad_value{"tls.ciphers", "ECDHE AESGCM", "must be an OpenSSL cipher list"},
                      bad_value{"tls.ciphersuites", "TLS_AES_128_GCM_SHA256\n",
                                "must be an OpenSSL cipher list"},
                      bad_value{"tls.handshake_timeout_ms", "0", "must be between 1 and"}));

INSTANTIATE_TEST_SUITE_P(
    listen, config_bad_value,
    ::testing::Values(bad_value{"listen", "", "expected 'host:port', '[ipv6]:port' or ':port'"},
                      bad_value{"listen", "8080", "missing ':port' in '8080'"},
                      bad_value{"listen", "localhost", "missing ':port'"},
                      bad_value{"listen", "127.0.0.1:", "missing port number"},
                      bad_value{"listen", ":65536", "port must be a number from 0 to 65535 (got '65536')"},
                      bad_value{"listen", ":-1", "port must be a number from 0 to 65535"},
                      bad_value{"listen", ":80x", "port must be a number"},
                      bad_value{"listen", ":+80", "port must be a number"},
                      bad_value{"listen", "::1:80", "an IPv6 address needs brackets"},
                      bad_value{"listen", "[::1]", "missing ':port' after ']'"},
                      bad_value{"listen", "[::1]80", "missing ':port' after ']'"},
                      bad_value{"listen", "[::1:80", "unbalanced '['"},
                      bad_value{"listen", "[zz]:80", "'zz' is not an IPv6 address"},
                      bad_value{"listen", "[]:80", "is not an IPv6 address"},
                      bad_value{"listen", "[1.2.3.4]:80", "is not an IPv6 address"},
                      bad_value{"listen", "300.1.1.1:80", "'300.1.1.1' is not an IPv4 address"},
                      bad_value{"listen", "1.2.3:80", "is not an IPv4 address"},
                      bad_value{"listen", "host name:80", "is not a host name or address"},
                      bad_value{"listen", "-bad-:80", "is not a host name or address"},
                      bad_value{"listen", "a..b:80", "is not a host name or address"}));

TEST(config, limits_are_inclusive) {
    config cfg;
    set_config_value(cfg, "io_threads", "256");
    set_config_value(cfg, "worker_threads", "4096");
    set_config_value(cfg, "blocking.threads", "20000");
    set_config_value(cfg, "limits.max_header_bytes", "256");
    set_config_value(cfg, "limits.max_body_bytes", "1073741824");
    set_config_value(cfg, "limits.max_keepalive_requests", "4294967295");
    set_config_value(cfg, "blocking.accept_queue", "0");
    EXPECT_EQ(cfg.io_threads, 256U);
    EXPECT_EQ(cfg.worker_threads, 4096U);
    EXPECT_EQ(cfg.blocking.threads, 20000U);
    EXPECT_EQ(cfg.limits.max_header_bytes, 256U);
    EXPECT_EQ(cfg.limits.max_body_bytes, 1073741824U);
    EXPECT_EQ(cfg.limits.max_keepalive_requests, 4294967295U);
    EXPECT_EQ(cfg.blocking.accept_queue, 0U);
    set_config_value(cfg, "io_threads", "007"); // leading zeros are still a plain decimal number
    EXPECT_EQ(cfg.io_threads, 7U);
}

TEST(config, listen_forms_parse) {
    const listen_address v4 = parse_listen("127.0.0.1:0");
    EXPECT_EQ(v4.host, "127.0.0.1");
    EXPECT_EQ(v4.port, 0);
    EXPECT_FALSE(v4.ipv6);

    const listen_address all = parse_listen(":8080");
    EXPECT_EQ(all.host, "");
    EXPECT_EQ(all.port, 8080);

    const listen_address v6 = parse_listen("[::1]:443");
    EXPECT_EQ(v6.host, "::1");
    EXPECT_EQ(v6.port, 443);
    EXPECT_TRUE(v6.ipv6);

    EXPECT_EQ(parse_listen("[::]:65535").host, "::");
    EXPECT_EQ(parse_listen("[::]:65535").port, 65535);
    EXPECT_EQ(parse_listen("localhost:80").host, "localhost");
    EXPECT_EQ(parse_listen("api-1.example.com:80").host, "api-1.example.com");

    const auto e = catch_startup_error([] { parse_listen("nope"); });
    EXPECT_EQ(e.key(), "listen");
}

TEST(config, environment_ignores_other_variables_and_sluice_config) {
    const fake_env env{"PATH=/usr/bin", "HOME=/root",          "SLUICE_CONFIG=/does/not/matter.toml",
                       "NOEQUALS",      "SLUICE_IO_THREADS=3", "sluice_io_threads=9"};
    config cfg;
    apply_config_env(cfg, env.span());
    EXPECT_EQ(cfg.io_threads, 3U);

    // A null entry (an environ span that kept its terminator) is skipped.
    const char* with_null[] = {"SLUICE_WORKER_THREADS=5", nullptr};
    apply_config_env(cfg, with_null);
    EXPECT_EQ(cfg.worker_threads, 5U);
}

TEST(config, unknown_environment_variable_is_named) {
    config cfg;
    const fake_env env{"SLUICE_IO_THREAD=3"};
    const auto e = catch_startup_error([&] { apply_config_env(cfg, env.span()); });
    EXPECT_EQ(e.key(), "SLUICE_IO_THREAD");
    EXPECT_TRUE(contains(e.what(), "unknown environment variable"));
    EXPECT_TRUE(contains(e.what(), "did you mean 'SLUICE_IO_THREADS'"));

    // Dots are not part of the environment name.
    const fake_env dotted{"SLUICE_LIMITS.MAX_BODY_BYTES=3"};
    EXPECT_EQ(catch_startup_error([&] { apply_config_env(cfg, dotted.span()); }).key(),
              "SLUICE_LIMITS.MAX_BODY_BYTES");
    const fake_env bare{"SLUICE_=1"};
    EXPECT_EQ(catch_startup_error([&] { apply_config_env(cfg, bare.span()); }).key(), "SLUICE_");
}

TEST(config, bad_environment_value_names_key_and_variable) {
    config cfg;
    const fake_env env{"SLUICE_LIMITS_MAX_BODY_BYTES=12abc"};
    const auto e = catch_startup_error([&] { apply_config_env(cfg, env.span()); });
    EXPECT_EQ(e.key(), "limits.max_body_bytes");
    EXPECT_TRUE(contains(e.what(), "unexpected 'abc'"));
    EXPECT_TRUE(contains(e.what(), "(from SLUICE_LIMITS_MAX_BODY_BYTES)"));

    const fake_env empty{"SLUICE_LISTEN="};
    EXPECT_EQ(catch_startup_error([&] { apply_config_env(cfg, empty.span()); }).key(), "listen");
}

TEST(config, validate_checks_a_hand_filled_config) {
    config cfg;
    cfg.io_threads = 0;
    auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "io_threads");
    EXPECT_TRUE(contains(e.what(), "between 1 and 256, got 0"));

    cfg = config{};
    cfg.listen = "nowhere";
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "listen");

    cfg = config{};
    cfg.limits.max_header_bytes = 10;
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "limits.max_header_bytes");

    cfg = config{};
    cfg.dispatch = static_cast<dispatch_mode>(42);
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "dispatch");

    cfg = config{};
    cfg.backend.clear();
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "backend");
}

TEST(config, tls_cert_and_key_go_together) {
    config cfg;
    cfg.tls.cert = "/c.pem";
    auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.key");
    EXPECT_TRUE(contains(e.what(), "must be set when tls.cert is set"));

    cfg.tls.cert.clear();
    cfg.tls.key = "/k.pem";
    e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.cert");

    cfg.tls.cert = "/c.pem";
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config, handover_socket_must_fit_a_unix_socket_address) {
    config cfg;
    EXPECT_NO_THROW(set_config_value(cfg, "handover_socket", std::string(107, 'a')));
    const auto e =
        catch_startup_error([&] { set_config_value(cfg, "handover_socket", std::string(108, 'a')); });
    EXPECT_EQ(e.key(), "handover_socket");
    EXPECT_TRUE(contains(e.what(), "at most 107 bytes")) << e.what();
    EXPECT_EQ(catch_startup_error([&] { set_config_value(cfg, "handover_socket", "a\nb"); }).key(),
              "handover_socket");
}

TEST(config, admin_listen_must_differ_from_listen) {
    config cfg;
    cfg.listen = "127.0.0.1:8080";
    cfg.admin.listen = "127.0.0.1:8080";
    auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "admin.listen");
    EXPECT_TRUE(contains(e.what(), "must differ from listen"));
    cfg.admin.listen = ":8080"; // all interfaces include the public address
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "admin.listen");
    cfg.admin.listen = "127.0.0.1:9901";
    EXPECT_NO_THROW(validate_config(cfg));
    cfg.admin.listen = "127.0.0.1:0"; // a kernel-chosen port never collides
    cfg.listen = "127.0.0.1:0";
    EXPECT_NO_THROW(validate_config(cfg));
    cfg.admin.listen = "nonsense";
    EXPECT_EQ(catch_startup_error([&] { set_config_value(cfg, "admin.listen", "nonsense"); }).key(),
              "admin.listen");
}

TEST(config, admin_listen_on_the_listen_socket_is_caught_however_it_is_spelled) {
    // Each of these binds, or overlaps, 127.0.0.1:8080: the second bind would fail with
    // EADDRINUSE, blamed on the wrong key.
    // ("[::]" takes IPv4 too where net.ipv6.bindv6only is 0, the Linux default, checked below.)
    for (const char* same : {"0.0.0.0:8080", "[::ffff:127.0.0.1]:8080", ":8080"}) {
        config cfg;
        cfg.listen = "127.0.0.1:8080";
        cfg.admin.listen = same;
        const auto e = catch_startup_error([&] { validate_config(cfg); });
        EXPECT_EQ(e.key(), "admin.listen") << same << ": " << e.what();
    }
    for (const char* other : {"127.0.0.2:8080", "[::1]:8080", "127.0.0.1:8081"}) {
        config cfg;
        cfg.listen = "127.0.0.1:8080";
        cfg.admin.listen = other;
        EXPECT_NO_THROW(validate_config(cfg)) << other;
    }
    config cfg;
    cfg.listen = "0.0.0.0:8080"; // IPv4's all interfaces are not IPv6's
    cfg.admin.listen = "[::1]:8080";
    EXPECT_NO_THROW(validate_config(cfg));
    cfg.listen = ":8080"; // binds 0.0.0.0, as getaddrinfo's first passive address
    EXPECT_NO_THROW(validate_config(cfg));
    // Names are compared as written, never looked up here (no DNS while validating).
    cfg.listen = "api.example:8080";
    cfg.admin.listen = "API.example:8080";
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "admin.listen");
    cfg.admin.listen = "0.0.0.0:8080"; // all interfaces include whatever the name is
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "admin.listen");
    cfg.admin.listen = "127.0.0.1:8080";
    EXPECT_NO_THROW(validate_config(cfg));
    cfg.listen = "[::]:8080";
    cfg.admin.listen = "127.0.0.1:8080";
    std::ifstream sysctl("/proc/sys/net/ipv6/bindv6only");
    int v6only = 0;
    if ((sysctl >> v6only) && v6only != 0) {
        EXPECT_NO_THROW(validate_config(cfg)) << "IPv6-only sockets leave IPv4 free";
    } else {
        EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "admin.listen") << "dual stack";
    }
}

TEST(config, access_log_format_is_combined_or_json) {
    config cfg;
    EXPECT_EQ(cfg.access_log.format, "combined");
    auto e = catch_startup_error([&] { set_config_value(cfg, "access_log.format", "xml"); });
    EXPECT_EQ(e.key(), "access_log.format");
    EXPECT_TRUE(contains(e.what(), "must be 'combined' or 'json'"));
}

TEST(config, describe_lists_every_key_as_toml) {
    config cfg;
    cfg.io_threads = 6;
    cfg.dispatch = dispatch_mode::pool;
    cfg.limits.max_body_bytes = 12345;
    cfg.tls.cert = "C:\\certs\\\"quoted\".pem";
    const std::string text = describe_config(cfg);
    EXPECT_TRUE(contains(text, "backend = \"auto\"\n"));
    EXPECT_TRUE(contains(text, "io_threads = 6\n"));
    EXPECT_TRUE(contains(text, "dispatch = \"pool\"\n"));
    EXPECT_TRUE(contains(text, "log_level = \"info\"\n"));
    EXPECT_TRUE(contains(text, "limits.max_body_bytes = 12345\n"));
    EXPECT_TRUE(contains(text, "tls.cert = \"C:\\\\certs\\\\\\\"quoted\\\".pem\"\n"));
}

} // namespace
} // namespace sluice
