// parse_command_line(): flags in both forms, --set, app options, --help, errors naming the
// flag, and the precedence defaults < file < environment < flags.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_test_helpers.h"

namespace sluice {
namespace {

using testing::catch_startup_error;
using testing::contains;
using testing::every_key;
using testing::fake_argv;
using testing::fake_env;
using testing::temp_file;

command_line parse(const fake_argv& args, const fake_env& env = {}, std::span<const app_option> app = {}) {
    return parse_command_line(args.argc(), args.argv(), env.span(), app, "A test program.");
}

TEST(command_line, no_arguments_gives_defaults) {
    const command_line cl = parse({});
    EXPECT_FALSE(cl.help);
    EXPECT_EQ(describe_config(cl.cfg), describe_config(config{}));
}

TEST(command_line, empty_argv_is_accepted) {
    const command_line cl = parse_command_line(0, nullptr, {});
    EXPECT_FALSE(cl.help);
    EXPECT_TRUE(contains(cl.usage, "Usage: sluice [options]"));
}

TEST(command_line, every_key_by_set_in_both_forms) {
    std::vector<std::string> split;
    std::vector<std::string> joined;
    for (const auto& k : every_key()) {
        const std::string assignment = std::string(k.key) + "=" + std::string(k.text);
        split.push_back("--set");
        split.push_back(assignment);
        joined.push_back("--set=" + assignment);
    }
    for (const auto& args : {split, joined}) {
        std::vector<const char*> argv{"prog"};
        for (const auto& a : args) {
            argv.push_back(a.c_str());
        }
        const command_line cl = parse_command_line(static_cast<int>(argv.size()), argv.data(), {});
        for (const auto& k : every_key()) {
            EXPECT_TRUE(k.arrived(cl.cfg)) << k.key;
        }
    }
}

TEST(command_line, short_flags_in_both_forms) {
    const command_line a = parse({"--backend", "epoll", "--listen", ":9000", "--io-threads", "3",
                                  "--dispatch", "pool", "--worker-threads", "12", "--threads", "40"});
    const command_line b = parse({"--backend=epoll", "--listen=:9000", "--io-threads=3", "--dispatch=pool",
                                  "--worker-threads=12", "--threads=40"});
    for (const command_line* cl : {&a, &b}) {
        EXPECT_EQ(cl->cfg.backend, "epoll");
        EXPECT_EQ(cl->cfg.listen, ":9000");
        EXPECT_EQ(cl->cfg.io_threads, 3U);
        EXPECT_EQ(cl->cfg.dispatch, dispatch_mode::pool);
        EXPECT_EQ(cl->cfg.worker_threads, 12U);
        EXPECT_EQ(cl->cfg.blocking.threads, 40U);
    }
}

TEST(command_line, value_may_contain_equals_and_last_flag_wins) {
    const command_line cl = parse(
        {"--set", "tls.cert=/a=b.pem", "--set", "tls.key=/k.pem", "--io-threads", "2", "--io-threads=5"});
    EXPECT_EQ(cl.cfg.tls.cert, "/a=b.pem");
    EXPECT_EQ(cl.cfg.io_threads, 5U);
}

TEST(command_line, bad_flag_value_names_key_and_flag) {
    auto e = catch_startup_error([] { parse({"--io-threads", "0"}); });
    EXPECT_EQ(e.key(), "io_threads");
    EXPECT_TRUE(contains(e.what(), "between 1 and 256, got 0 (from --io-threads)"));

    e = catch_startup_error([] { parse({"--threads=-3"}); });
    EXPECT_EQ(e.key(), "blocking.threads");
    EXPECT_TRUE(contains(e.what(), "must not be negative"));

    e = catch_startup_error([] { parse({"--set", "limits.max_body_bytes=12abc"}); });
    EXPECT_EQ(e.key(), "limits.max_body_bytes");
    EXPECT_TRUE(contains(e.what(), "(from --set)"));

    e = catch_startup_error([] { parse({"--dispatch", "threads"}); });
    EXPECT_EQ(e.key(), "dispatch");

    e = catch_startup_error([] { parse({"--listen="}); });
    EXPECT_EQ(e.key(), "listen");
}

TEST(command_line, unknown_flag_is_named) {
    auto e = catch_startup_error([] { parse({"--frobnicate", "1"}); });
    EXPECT_EQ(e.key(), "--frobnicate");
    EXPECT_TRUE(contains(e.what(), "unknown flag"));

    e = catch_startup_error([] { parse({"--listne=:80"}); });
    EXPECT_EQ(e.key(), "--listne");
    EXPECT_TRUE(contains(e.what(), "did you mean '--listen'"));

    e = catch_startup_error([] { parse({"-x"}); });
    EXPECT_EQ(e.key(), "-x");
    EXPECT_TRUE(contains(e.what(), "unknown flag"));

    // Keys are not flags: the dotted keys go through --set.
    e = catch_startup_error([] { parse({"--limits.max_body_bytes=5"}); });
    EXPECT_EQ(e.key(), "--limits.max_body_bytes");
}

TEST(command_line, missing_value_names_the_flag) {
    auto e = catch_startup_error([] { parse({"--listen"}); });
    EXPECT_EQ(e.key(), "--listen");
    EXPECT_TRUE(contains(e.what(), "missing value"));

    // The next flag is not swallowed as the value.
    e = catch_startup_error([] { parse({"--listen", "--io-threads", "4"}); });
    EXPECT_EQ(e.key(), "--listen");

    e = catch_startup_error([] { parse({"--io-threads", "2", "--set"}); });
    EXPECT_EQ(e.key(), "--set");
    EXPECT_TRUE(contains(e.what(), "missing value"));
}

TEST(command_line, positional_arguments_are_errors) {
    auto e = catch_startup_error([] { parse({"serve"}); });
    EXPECT_EQ(e.key(), "");
    EXPECT_TRUE(contains(e.what(), "unexpected argument 'serve'"));

    e = catch_startup_error([] { parse({"--io-threads", "2", "3"}); });
    EXPECT_TRUE(contains(e.what(), "unexpected argument '3'"));

    e = catch_startup_error([] { parse({"--"}); });
    EXPECT_TRUE(contains(e.what(), "unexpected argument '--'"));
}

TEST(command_line, set_needs_a_known_key_and_an_equals_sign) {
    auto e = catch_startup_error([] { parse({"--set", "io_threads"}); });
    EXPECT_EQ(e.key(), "--set");
    EXPECT_TRUE(contains(e.what(), "expected KEY=VALUE, got 'io_threads'"));

    e = catch_startup_error([] { parse({"--set", "=4"}); });
    EXPECT_EQ(e.key(), "--set");

    e = catch_startup_error([] { parse({"--set", "limits.max_bodybytes=4"}); });
    EXPECT_EQ(e.key(), "limits.max_bodybytes");
    EXPECT_TRUE(contains(e.what(), "unknown configuration key"));
    EXPECT_TRUE(contains(e.what(), "did you mean 'limits.max_body_bytes'"));
}

TEST(command_line, help_fills_usage_with_flags_keys_and_app_options) {
    std::string upstream = "http://127.0.0.1:9000";
    const std::vector<app_option> app{{"upstream", "URL", "the backend service", &upstream}};
    const command_line cl = parse({"--help"}, {}, app);
    EXPECT_TRUE(cl.help);
    EXPECT_TRUE(contains(cl.usage, "Usage: sluice-test [options]"));
    EXPECT_TRUE(contains(cl.usage, "A test program."));
    for (const char* flag :
         {"--backend NAME", "--listen HOST:PORT", "--io-threads N", "--dispatch inline|pool",
          "--worker-threads N", "--threads N", "--config FILE", "--set KEY=VALUE", "--help"}) {
        EXPECT_TRUE(contains(cl.usage, flag));
    }
    EXPECT_TRUE(contains(cl.usage, "--upstream URL"));
    EXPECT_TRUE(contains(cl.usage, "the backend service (default: http://127.0.0.1:9000)"));
    for (const auto& k : every_key()) {
        EXPECT_TRUE(contains(cl.usage, "\n  " + std::string(k.key) + " ")) << k.key;
    }
    const auto line_of = [&](std::string_view key) {
        const std::size_t at = cl.usage.find("\n  " + std::string(key) + " ");
        return at == std::string::npos ? std::string()
                                       : cl.usage.substr(at + 1, cl.usage.find('\n', at + 1) - at - 1);
    };
    EXPECT_TRUE(contains(line_of("io_threads"), "1..256"));
    EXPECT_TRUE(contains(line_of("io_threads"), "(default: 1)"));
    EXPECT_TRUE(contains(line_of("watchdog_ms"), "0 = off"));
    EXPECT_TRUE(contains(line_of("dispatch"), "inline|pool"));
    EXPECT_TRUE(contains(line_of("limits.max_body_bytes"), "0..1073741824"));
    EXPECT_TRUE(contains(cl.usage, "SLUICE_"));
    EXPECT_EQ(upstream, "http://127.0.0.1:9000");
}

TEST(command_line, help_wins_over_bad_arguments_and_environment) {
    const fake_env env{"SLUICE_NOPE=1"};
    const command_line cl = parse({"--frobnicate", "serve", "-h"}, env);
    EXPECT_TRUE(cl.help);
    EXPECT_FALSE(cl.usage.empty());

    const auto e = catch_startup_error([] { parse({"--help=yes"}); });
    EXPECT_EQ(e.key(), "--help");
    EXPECT_TRUE(contains(e.what(), "takes no value"));
}

TEST(command_line, app_options_set_their_targets) {
    std::string upstream;
    std::string mode = "fast";
    const std::vector<app_option> app{{"upstream", "URL", "the backend", &upstream},
                                      {"mode", "NAME", "how to run", &mode}};
    const command_line cl = parse({"--upstream", "http://u:1", "--mode=slow", "--io-threads", "2"}, {}, app);
    EXPECT_EQ(upstream, "http://u:1");
    EXPECT_EQ(mode, "slow");
    EXPECT_EQ(cl.cfg.io_threads, 2U);

    const auto e = catch_startup_error([&] { parse({"--upstream"}, {}, app); });
    EXPECT_EQ(e.key(), "--upstream");
}

TEST(command_line, bad_app_options_are_programming_errors) {
    std::string s;
    const std::vector<app_option> collides{{"listen", "X", "", &s}};
    EXPECT_THROW(parse({}, {}, collides), std::invalid_argument);
    const std::vector<app_option> no_target{{"upstream", "X", "", nullptr}};
    EXPECT_THROW(parse({}, {}, no_target), std::invalid_argument);
    const std::vector<app_option> twice{{"a", "X", "", &s}, {"a", "X", "", &s}};
    EXPECT_THROW(parse({}, {}, twice), std::invalid_argument);
    const std::vector<app_option> dashes{{"--a", "X", "", &s}};
    EXPECT_THROW(parse({}, {}, dashes), std::invalid_argument);
}

TEST(command_line, every_key_from_a_config_file) {
    std::string doc;
    for (const auto& k : every_key()) {
        doc += std::string(k.key) + " = " + std::string(k.toml) + "\n";
    }
    const temp_file file(doc);
    const command_line cl = parse({"--config", file.path()});
    for (const auto& k : every_key()) {
        EXPECT_TRUE(k.arrived(cl.cfg)) << k.key;
    }
}

TEST(command_line, precedence_defaults_file_environment_flags) {
    const temp_file file("io_threads = 2\nworker_threads = 20\nlog_level = \"warn\"\n");
    const fake_env env{"SLUICE_CONFIG=" + file.path(), "SLUICE_IO_THREADS=3", "SLUICE_WORKER_THREADS=30"};

    const command_line all = parse({"--io-threads", "4"}, env);
    EXPECT_EQ(all.cfg.io_threads, 4U);       // flag over environment
    EXPECT_EQ(all.cfg.worker_threads, 30U);  // environment over file
    EXPECT_EQ(all.cfg.log, log_level::warn); // file over default
    EXPECT_EQ(all.cfg.listen, config{}.listen);

    const command_line no_flag = parse({}, env);
    EXPECT_EQ(no_flag.cfg.io_threads, 3U);

    const fake_env file_only{"SLUICE_CONFIG=" + file.path()};
    EXPECT_EQ(parse({}, file_only).cfg.io_threads, 2U);
}

TEST(command_line, config_flag_overrides_sluice_config) {
    const temp_file from_env("io_threads = 2\n");
    const temp_file from_flag("io_threads = 7\n");
    const fake_env env{"SLUICE_CONFIG=" + from_env.path()};
    EXPECT_EQ(parse({"--config=" + from_flag.path()}, env).cfg.io_threads, 7U);
    EXPECT_EQ(parse({}, env).cfg.io_threads, 2U);
    // An empty SLUICE_CONFIG means no file.
    const fake_env empty{"SLUICE_CONFIG="};
    EXPECT_EQ(parse({}, empty).cfg.io_threads, config{}.io_threads);
}

TEST(command_line, a_second_config_flag_is_an_error_not_a_silent_replacement) {
    const temp_file first("io_threads = 2\n");
    const temp_file second("io_threads = 3\n");
    const auto e = catch_startup_error([&] {
        parse({"--config", first.path(), "--config=" + second.path()});
    });
    EXPECT_EQ(e.key(), "--config");
    EXPECT_TRUE(contains(e.what(), "given twice")) << e.what();
    EXPECT_TRUE(contains(e.what(), first.path())) << e.what();
}

TEST(command_line, config_file_errors_say_where_the_file_came_from) {
    const fake_env env{"SLUICE_CONFIG=/nonexistent/sluice.toml"};
    auto e = catch_startup_error([&] { parse({}, env); });
    EXPECT_TRUE(contains(e.what(), "cannot read config file '/nonexistent/sluice.toml'"));
    EXPECT_TRUE(contains(e.what(), "(config file from SLUICE_CONFIG)"));

    e = catch_startup_error([] { parse({"--config", "/nonexistent/other.toml"}); });
    EXPECT_TRUE(contains(e.what(), "(config file from --config)"));

    e = catch_startup_error([] { parse({"--config="}); });
    EXPECT_EQ(e.key(), "--config");

    // Errors inside the file keep naming the key.
    const temp_file bad("[limits]\nmax_connections = 0\n");
    e = catch_startup_error([&] { parse({"--config", bad.path()}); });
    EXPECT_EQ(e.key(), "limits.max_connections");
    EXPECT_TRUE(contains(e.what(), bad.path() + ":2"));
}

TEST(command_line, unknown_environment_variable_fails_the_parse) {
    const fake_env env{"SLUICE_IOTHREADS=2"};
    const auto e = catch_startup_error([&] { parse({}, env); });
    EXPECT_EQ(e.key(), "SLUICE_IOTHREADS");
}

TEST(command_line, tls_pair_is_checked_across_sources) {
    const temp_file file("[tls]\ncert = \"/c.pem\"\n");
    auto e = catch_startup_error([&] { parse({"--config", file.path()}); });
    EXPECT_EQ(e.key(), "tls.key");

    const fake_env env{"SLUICE_TLS_KEY=/k.pem"};
    const command_line cl = parse({"--config", file.path()}, env);
    EXPECT_EQ(cl.cfg.tls.cert, "/c.pem");
    EXPECT_EQ(cl.cfg.tls.key, "/k.pem");

    // A flag may switch TLS off again by clearing both.
    const command_line off = parse({"--config", file.path(), "--set", "tls.cert="}, {});
    EXPECT_EQ(off.cfg.tls.cert, "");
}

} // namespace
} // namespace sluice
