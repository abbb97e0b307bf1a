// tls.listen (docs/tls.md, "Plaintext and TLS in one server"): a second listener that speaks
// TLS while `listen` stays plaintext. Its rules with tls.cert, listen and admin.listen, from
// code, the environment, the config file and the command line; every error names the key.

#include <gtest/gtest.h>

#include <string>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_test_helpers.h"

namespace sluice {
namespace {

using testing::catch_startup_error;
using testing::contains;
using testing::fake_argv;
using testing::fake_env;
using testing::temp_file;

config with_tls() {
    config cfg;
    cfg.listen = "127.0.0.1:8080";
    cfg.tls.cert = "/c.pem";
    cfg.tls.key = "/k.pem";
    return cfg;
}

TEST(config_tls_listen, is_off_by_default_and_tls_cert_alone_keeps_one_tls_listener) {
    config cfg = with_tls();
    EXPECT_EQ(cfg.tls.listen, "");
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config_tls_listen, a_second_address_with_tls_cert_is_valid) {
    config cfg = with_tls();
    cfg.tls.listen = "127.0.0.1:8443";
    EXPECT_NO_THROW(validate_config(cfg));
    cfg.tls.listen = "[::1]:8443";
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config_tls_listen, without_tls_cert_is_a_startup_error_naming_tls_listen) {
    config cfg;
    cfg.tls.listen = "127.0.0.1:8443";
    const auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.listen");
    EXPECT_TRUE(contains(e.what(), "tls.cert")) << e.what();
}

TEST(config_tls_listen, must_differ_from_listen) {
    config cfg = with_tls();
    cfg.tls.listen = "127.0.0.1:8080";
    auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.listen");
    EXPECT_TRUE(contains(e.what(), "must differ from listen")) << e.what();
    cfg.tls.listen = ":8080"; // all interfaces include the plaintext address
    EXPECT_EQ(catch_startup_error([&] { validate_config(cfg); }).key(), "tls.listen");
    cfg.listen = "127.0.0.1:0"; // kernel-chosen ports never collide
    cfg.tls.listen = "127.0.0.1:0";
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config_tls_listen, must_differ_from_admin_listen) {
    config cfg = with_tls();
    cfg.admin.listen = "127.0.0.1:9901";
    cfg.tls.listen = "127.0.0.1:9901";
    const auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.listen");
    EXPECT_TRUE(contains(e.what(), "must differ from admin.listen")) << e.what();
    cfg.tls.listen = "127.0.0.1:8443";
    EXPECT_NO_THROW(validate_config(cfg));
}

TEST(config_tls_listen, a_bad_address_names_tls_listen) {
    config cfg;
    EXPECT_EQ(catch_startup_error([&] { set_config_value(cfg, "tls.listen", "nonsense"); }).key(),
              "tls.listen");
    EXPECT_EQ(catch_startup_error([&] { set_config_value(cfg, "tls.listen", "127.0.0.1:70000"); }).key(),
              "tls.listen");
    EXPECT_EQ(cfg.tls.listen, "");
}

TEST(config_tls_listen, arrives_from_the_environment_the_file_and_the_flags) {
    const fake_env env{"SLUICE_TLS_CERT=/c.pem", "SLUICE_TLS_KEY=/k.pem", "SLUICE_TLS_LISTEN=:8443"};
    const fake_argv none{};
    EXPECT_EQ(parse_command_line(none.argc(), none.argv(), env.span()).cfg.tls.listen, ":8443");

    const temp_file file("[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nlisten = \"127.0.0.1:8444\"\n");
    const fake_argv from_file{"--config", file.path()};
    EXPECT_EQ(parse_command_line(from_file.argc(), from_file.argv(), {}).cfg.tls.listen, "127.0.0.1:8444");

    const fake_argv flags{"--config", file.path(), "--tls-listen", ":8445"};
    EXPECT_EQ(parse_command_line(flags.argc(), flags.argv(), {}).cfg.tls.listen, ":8445");
    const fake_argv joined{"--config", file.path(), "--tls-listen=:8446"};
    EXPECT_EQ(parse_command_line(joined.argc(), joined.argv(), {}).cfg.tls.listen, ":8446");

    // Checked across sources: a flag that sets tls.listen without any tls.cert is refused.
    const fake_argv alone{"--tls-listen", ":8443"};
    EXPECT_EQ(catch_startup_error([&] { parse_command_line(alone.argc(), alone.argv(), {}); }).key(),
              "tls.listen");
}

} // namespace
} // namespace sluice
