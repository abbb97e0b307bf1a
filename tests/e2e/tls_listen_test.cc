// tls.listen end to end: curl, an independent client, against one server on a plaintext and a
// TLS port (docs/tls.md, "Plaintext and TLS in one server"), in process on every TLS row and as
// the sluice-hello binary configured by its --tls-listen flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <sluice/exchange.h>

#include "support/app_process.h"
#include "support/backend_matrix.h"
#include "support/process.h"
#include "support/test_certs.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

// curl -sS with a 5 s cap, https verified against the run's own CA (not -k).
process_result curl(const std::string& url) {
    const std::string bin = find_in_path("curl").value_or("");
    EXPECT_FALSE(bin.empty()) << "the curl binary was not found in PATH (scripts/bootstrap installs it)";
    process_result r =
        run_process({bin, "-sS", "--max-time", "5", "--cacert", shared_test_certs().cert_path(), url},
                    milliseconds(10'000));
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_FALSE(r.timed_out) << "curl did not finish: " << url;
    return r;
}

std::string local(const char* scheme, std::uint16_t port) {
    return std::string(scheme) + "://127.0.0.1:" + std::to_string(port) + "/";
}

class tls_listen_curl_test : public backend_test {};

TEST_P(tls_listen_curl_test, http_on_listen_and_https_on_tls_listen) {
    srv().config().tls.listen = "127.0.0.1:0";
    srv().route("GET", "/", [](exchange& ex) { ex.response().text(ex.request().tls() ? "tls" : "plain"); });
    srv().start();
    const process_result plain = curl(local("http", srv().port()));
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, "plain");
    const process_result tls = curl(local("https", srv().server().tls_port()));
    EXPECT_EQ(tls.exit_code, 0) << tls.err;
    EXPECT_EQ(tls.out, "tls");
    // Each port refuses the other protocol: curl fails rather than getting a page.
    EXPECT_NE(curl(local("https", srv().port())).exit_code, 0);
    EXPECT_NE(curl(local("http", srv().server().tls_port())).out, "plain");
}

SLUICE_TLS_BACKEND_SUITE(tls_listen_curl_test);

TEST(tls_listen_app, the_tls_listen_flag_opens_a_second_port_that_speaks_tls) {
    app_process app(SLUICE_HELLO_BIN,
                    {"--tls-listen", "127.0.0.1:0", "--set", "tls.cert=" + shared_test_certs().cert_path(),
                     "--set", "tls.key=" + shared_test_certs().key_path()});
    ASSERT_TRUE(app.started()) << app.error();
    const std::string log = app.log();
    const auto at = log.find("(TLS port ");
    ASSERT_NE(at, std::string::npos) << log;
    const auto tls_port = static_cast<std::uint16_t>(std::stoi(log.substr(at + 10)));
    ASSERT_NE(tls_port, app.port());
    const process_result plain = curl(local("http", app.port()));
    EXPECT_EQ(plain.exit_code, 0) << plain.err;
    EXPECT_EQ(plain.out, "Hello, World!");
    const process_result tls = curl(local("https", tls_port));
    EXPECT_EQ(tls.exit_code, 0) << tls.err;
    EXPECT_EQ(tls.out, "Hello, World!");
    EXPECT_EQ(app.stop(), 0);
}

} // namespace
} // namespace sluice::test
