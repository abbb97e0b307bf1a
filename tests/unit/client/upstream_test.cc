// Upstream addresses: "host:port" as before, and http:// / https:// URLs with default ports.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <memory>
#include <stdexcept>
#include <string>

#include <sluice/client.h>

#include "client/upstream.h"

namespace sluice::detail {
namespace {

// One address as the upstream parsed and resolved it.
struct one_address {
    std::string name;
    std::string host;
    bool tls = false;
    sockaddr_storage addr{};
};

std::unique_ptr<one_address> resolve_address(const std::string& given) {
    const upstream_state s({given}, {});
    auto a = std::make_unique<one_address>();
    a->name = s.hosts().at(0).name;
    a->host = s.hosts().at(0).host;
    a->tls = s.hosts().at(0).tls;
    a->addr = s.current()->at(0)->addr;
    return a;
}

TEST(upstream_address, host_port_is_plaintext) {
    auto a = resolve_address("127.0.0.1:8080");
    EXPECT_FALSE(a->tls);
    EXPECT_EQ(a->name, "127.0.0.1:8080");
    EXPECT_EQ(a->host, "127.0.0.1");
}

TEST(upstream_address, https_defaults_to_port_443) {
    auto a = resolve_address("https://127.0.0.1");
    EXPECT_TRUE(a->tls);
    EXPECT_EQ(a->host, "127.0.0.1");
    EXPECT_EQ(a->name, "127.0.0.1"); // the Host header: the default port is left out
    ASSERT_EQ(a->addr.ss_family, AF_INET);
    EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in&>(a->addr).sin_port), 443);
}

TEST(upstream_address, https_with_port_and_trailing_slash) {
    auto a = resolve_address("https://localhost:8443/");
    EXPECT_TRUE(a->tls);
    EXPECT_EQ(a->host, "localhost");
    EXPECT_EQ(a->name, "localhost:8443");
}

TEST(upstream_address, http_defaults_to_port_80) {
    auto a = resolve_address("http://[::1]");
    EXPECT_FALSE(a->tls);
    EXPECT_EQ(a->host, "::1");
    EXPECT_EQ(a->name, "[::1]");
    EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in6&>(a->addr).sin6_port), 80);
}

TEST(upstream_address, a_default_port_written_out_is_left_out_of_the_host_header) {
    // RFC 9110 §4.2.3: the scheme's default port and no port are the same authority; nginx's
    // $proxy_host leaves it out too. Any other port stays.
    EXPECT_EQ(resolve_address("http://127.0.0.1:80")->name, "127.0.0.1");
    EXPECT_EQ(resolve_address("127.0.0.1:80")->name, "127.0.0.1"); // a bare address is http
    EXPECT_EQ(resolve_address("https://127.0.0.1:443")->name, "127.0.0.1");
    EXPECT_EQ(resolve_address("http://[::1]:80/")->name, "[::1]");
    EXPECT_EQ(resolve_address("https://127.0.0.1:80")->name, "127.0.0.1:80");
    EXPECT_EQ(resolve_address("http://127.0.0.1:443")->name, "127.0.0.1:443");
    EXPECT_EQ(resolve_address("[::1]:8080")->name, "[::1]:8080");
}

TEST(upstream_address, malformed_urls_are_refused) {
    EXPECT_THROW(resolve_address("https://127.0.0.1/api"), std::invalid_argument); // a path
    EXPECT_THROW(resolve_address("ftp://127.0.0.1:21"), std::invalid_argument);
    EXPECT_THROW(resolve_address("https://"), std::invalid_argument);
    EXPECT_THROW(resolve_address("https://127.0.0.1:0"), std::invalid_argument);
}

TEST(upstream, tls_options_need_a_readable_ca_file) {
    client_options o;
    o.tls.ca_file = "/nonexistent/ca.pem";
    EXPECT_THROW(client(upstream({"https://127.0.0.1:1"}), o), std::invalid_argument);
    // A plaintext upstream never loads it.
    EXPECT_NO_THROW(client(upstream({"127.0.0.1:1"}), o));
}

} // namespace
} // namespace sluice::detail
