// The TLS keys that are more than one value: [[tls.sni]] tables (file only), the client
// certificate pair (tls.client_ca + tls.verify_client), tls.ktls as a TOML boolean, and the
// keys that need tls.cert.
#include <gtest/gtest.h>

#include <string>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_test_helpers.h"

namespace sluice {
namespace {

using testing::catch_startup_error;
using testing::contains;

TEST(config_tls_sni, entries_are_read_in_order) {
    config cfg;
    apply_config_toml(cfg, R"(
[tls]
cert = "/d.pem"
key = "/d.key"

[[tls.sni]]
names = ["a.example", "*.a.example"]
cert = "/a.pem"
key = "/a.key"

[[tls.sni]]
names = "b.example"
cert = "/b.pem"
key = "/b.key"
)",
                      "sni.toml");
    ASSERT_EQ(cfg.tls.sni.size(), 2u);
    EXPECT_EQ(cfg.tls.sni[0].names, (std::vector<std::string>{"a.example", "*.a.example"}));
    EXPECT_EQ(cfg.tls.sni[0].cert, "/a.pem");
    EXPECT_EQ(cfg.tls.sni[1].names, std::vector<std::string>{"b.example"});
    EXPECT_EQ(cfg.tls.sni[1].key, "/b.key");
    EXPECT_NO_THROW(validate_config(cfg));
    // describe_config prints them back as TOML that reads to the same entries.
    config again;
    apply_config_toml(again, describe_config(cfg), "described.toml");
    ASSERT_EQ(again.tls.sni.size(), 2u);
    EXPECT_EQ(again.tls.sni[0].names, cfg.tls.sni[0].names);
    EXPECT_EQ(again.tls.sni[1].cert, "/b.pem");
}

TEST(config_tls_sni, errors_name_the_entry) {
    config cfg;
    auto e = catch_startup_error(
        [&] { apply_config_toml(cfg, "[[tls.sni]]\nnames = [\"a.x\"]\ncrt = \"/a\"\n", "s.toml"); });
    EXPECT_EQ(e.key(), "tls.sni[0].crt");
    EXPECT_TRUE(contains(e.what(), "s.toml:3"));

    e = catch_startup_error([&] { apply_config_toml(cfg, "[tls]\nsni = 5\n", "s.toml"); });
    EXPECT_EQ(e.key(), "tls.sni");

    config two;
    two.tls.cert = "/d.pem";
    two.tls.key = "/d.key";
    two.tls.sni = {{{"a.x"}, "/a.pem", "/a.key"}, {{"b.x"}, "/b.pem", ""}};
    e = catch_startup_error([&] { validate_config(two); });
    EXPECT_EQ(e.key(), "tls.sni[1].key");
    two.tls.sni[1] = {{"bad name"}, "/b.pem", "/b.key"};
    e = catch_startup_error([&] { validate_config(two); });
    EXPECT_EQ(e.key(), "tls.sni[1].names");
    two.tls.sni[1] = {{}, "/b.pem", "/b.key"};
    e = catch_startup_error([&] { validate_config(two); });
    EXPECT_EQ(e.key(), "tls.sni[1].names");

    config no_default;
    no_default.tls.sni = {{{"a.x"}, "/a.pem", "/a.key"}};
    e = catch_startup_error([&] { validate_config(no_default); });
    EXPECT_EQ(e.key(), "tls.cert");
}

// Names that could never match a client's SNI, or that another entry already claims, are
// startup errors: a dead entry is otherwise silent.
TEST(config_tls_sni, names_that_cannot_match_or_repeat_are_refused) {
    const auto with_names = [](std::vector<std::string> second) {
        config c;
        c.tls.cert = "/d.pem";
        c.tls.key = "/d.key";
        c.tls.sni = {{{"a.example"}, "/a.pem", "/a.key"}, {std::move(second), "/b.pem", "/b.key"}};
        return c;
    };
    for (const std::vector<std::string>& bad :
         std::vector<std::vector<std::string>>{{"1.2.3.4"},    // an IPv4 literal: SNI never carries one
                                               {"*.10.0.0.1"}, // nor under a wildcard
                                               {std::string(64, 'a') + ".example"}, // a label over 63 bytes
                                               {"a-.example"},                      // a label ending with '-'
                                               {"-a.example"},                      // or beginning with one
                                               {"A.EXAMPLE"}, // entry 0's name: the first would always win
                                               {"b.example", "B.example"}}) { // twice in one entry
        SCOPED_TRACE(bad.back());
        config c = with_names(bad);
        const auto e = catch_startup_error([&] { validate_config(c); });
        EXPECT_EQ(e.key(), "tls.sni[1].names") << e.what();
    }
    for (const std::string& good :
         std::vector<std::string>{"b.example", "*.b.example", std::string(63, 'a') + ".example", "x1.io",
                                  "a.b-c.example", "localhost"}) {
        SCOPED_TRACE(good);
        config c = with_names({good});
        EXPECT_NO_THROW(validate_config(c));
    }
}

TEST(config_tls_client_cert, ca_and_mode_come_together) {
    config cfg;
    cfg.tls.cert = "/d.pem";
    cfg.tls.key = "/d.key";
    cfg.tls.verify_client = tls_verify_client::require;
    auto e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.client_ca");
    cfg.tls.verify_client = tls_verify_client::off;
    cfg.tls.client_ca = "/ca.pem";
    e = catch_startup_error([&] { validate_config(cfg); });
    EXPECT_EQ(e.key(), "tls.verify_client");
    cfg.tls.verify_client = tls_verify_client::optional;
    EXPECT_NO_THROW(validate_config(cfg));
}

// The cipher lists shape the TLS listener: set without tls.cert, the server would start in
// plaintext and the list would do nothing. Each is refused, as tls.sni, tls.client_ca and
// tls.ktls are, with a message that names it. (tls.min_version and tls.handshake_timeout_ms
// always have a value, and a config shared by a TLS and a plaintext server may set them.)
TEST(config_tls_extras, need_the_certificate) {
    const auto expect_needs_cert = [](const char* key, const char* value) {
        config cfg;
        set_config_value(cfg, key, value);
        const auto e = catch_startup_error([&] { validate_config(cfg); });
        EXPECT_EQ(e.key(), "tls.cert") << key;
        EXPECT_TRUE(contains(e.what(), key)) << e.what();
        cfg.tls.cert = "/d.pem";
        cfg.tls.key = "/d.key";
        EXPECT_NO_THROW(validate_config(cfg)) << key;
    };
    expect_needs_cert("tls.ciphers", "ECDHE-RSA-AES128-GCM-SHA256");
    expect_needs_cert("tls.ciphersuites", "TLS_AES_128_GCM_SHA256");
    expect_needs_cert("tls.ktls", "true");
}

TEST(config_tls_ktls, a_toml_boolean) {
    config cfg;
    apply_config_toml(cfg, "[tls]\nktls = true\n", "k.toml");
    EXPECT_TRUE(cfg.tls.ktls);
    apply_config_toml(cfg, "tls.ktls = false\n", "k.toml");
    EXPECT_FALSE(cfg.tls.ktls);
    const auto e = catch_startup_error([] {
        config c;
        set_config_value(c, "tls.ktls", "yes");
    });
    EXPECT_EQ(e.key(), "tls.ktls");
}

} // namespace
} // namespace sluice
