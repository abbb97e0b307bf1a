// Operating the real sluice-hello binary: /metrics parsed by the Prometheus client library's
// own text-format parser with counts equal to the requests made, SIGTERM (readiness false,
// listeners closed, the drain, exit 0), SIGUSR1 (the access log reopened) and SIGHUP (the TLS
// certificate reloaded).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/app_process.h"
#include "support/backend_matrix.h"
#include "support/process.h"
#include "support/test_certs.h"
#include "support/test_client.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::optional<http_response> get(std::uint16_t port, std::string_view target) {
    test_client c(port);
    if (!c.send(get_request(target, "Connection: close\r\n"))) {
        return std::nullopt;
    }
    return c.read_response();
}

// Scrapes /metrics and sums sluice_http_requests_total by route with prometheus_client's parser
// (python3-prometheus-client, installed by scripts/bootstrap): an independent reading of the
// format. Prints "route=count" per route, sorted.
constexpr const char* parse_script = R"py(
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
sums = {}
seen = set()
for family in text_string_to_metric_families(text):
    seen.add(family.name)
    for s in family.samples:
        if s.name == "sluice_http_requests_total":
            key = "%s %s %s" % (s.labels["route"], s.labels["method"], s.labels["code_class"])
            sums[key] = sums.get(key, 0) + s.value
for name in ("sluice_http_request_duration_seconds", "sluice_connections_accepted", "process_resident_memory_bytes"):
    if name not in seen:
        print("missing family", name)
for k in sorted(sums):
    print("%s=%d" % (k, sums[k]))
)py";

TEST(operations, metrics_parse_with_prometheus_client_and_count_every_request) {
    for (const std::string backend : {"epoll", "uring", "blocking"}) {
        SCOPED_TRACE(backend);
        if (!backend_unavailable_reason(backend).empty()) {
            continue;
        }
        app_process app(SLUICE_HELLO_BIN,
                        {"--backend", backend, "--io-threads", "2", "--set", "admin.listen=127.0.0.1:0"});
        ASSERT_TRUE(app.started()) << app.error();
        ASSERT_NE(app.admin_port(), 0) << app.log();
        // Several connections, so that both loops count some.
        for (int conn = 0; conn < 5; ++conn) {
            test_client c(app.port());
            for (int i = 0; i < 10; ++i) {
                ASSERT_TRUE(c.send(get_request("/"))) << c.error();
                auto r = c.read_response();
                ASSERT_TRUE(r) << c.error();
                ASSERT_EQ(r->status, 200);
            }
        }
        for (int i = 0; i < 3; ++i) {
            auto r = get(app.port(), "/missing");
            ASSERT_TRUE(r);
            ASSERT_EQ(r->status, 404);
        }
        // Debian's interpreter, where python3-prometheus-client is installed (a python3 earlier in
        // PATH, such as pyenv's, would not see it).
        const auto py =
            run_process({"/usr/bin/python3", "-c", parse_script, std::to_string(app.admin_port())});
        ASSERT_EQ(py.exit_code, 0) << py.err;
        EXPECT_EQ(py.out, "(unmatched) GET 4xx=3\n/ GET 2xx=50\n");
        EXPECT_EQ(app.stop(), 0);
    }
}

TEST(operations, sigterm_turns_readiness_off_drains_and_exits_0) {
    app_process app(SLUICE_HELLO_BIN, {"--set", "admin.listen=127.0.0.1:0"});
    ASSERT_TRUE(app.started()) << app.error();
    auto ready = get(app.admin_port(), "/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200);
    test_client slow(app.port(), milliseconds(10'000));
    ASSERT_TRUE(slow.send(get_request("/delay?ms=1500")));
    // Let the request reach its handler before the signal.
    ASSERT_TRUE(wait_until([&] {
        auto m = get(app.admin_port(), "/metrics");
        return m && m->body.find("\nsluice_http_requests_suspended 1\n") != std::string::npos;
    }));
    ASSERT_EQ(::kill(app.pid(), SIGTERM), 0);
    ASSERT_TRUE(wait_until([&] {
        auto r = get(app.admin_port(), "/readyz");
        return r && r->status == 503 && r->body == "not ready: draining\n";
    })) << app.log();
    // The listeners are closed: a new connection is refused while the old request drains.
    ASSERT_TRUE(wait_until([&] { return !test_client(app.port(), milliseconds(500)).connected(); }));
    auto r = slow.read_response();
    ASSERT_TRUE(r) << slow.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Connection"), "close");
    EXPECT_EQ(app.stop(), 0) << app.log();
}

// shutdown_delay_ms: after SIGTERM the process serves on (new connections too) with /readyz
// at 503; a second SIGTERM ends the delay, and the drain and exit 0 follow.
TEST(operations, sigterm_with_a_shutdown_delay_serves_on_until_a_second_sigterm) {
    app_process app(SLUICE_HELLO_BIN,
                    {"--set", "admin.listen=127.0.0.1:0", "--set", "shutdown_delay_ms=600000"});
    ASSERT_TRUE(app.started()) << app.error();
    ASSERT_EQ(::kill(app.pid(), SIGTERM), 0);
    ASSERT_TRUE(wait_until([&] {
        auto r = get(app.admin_port(), "/readyz");
        return r && r->status == 503 && r->body == "not ready: draining\n";
    })) << app.log();
    auto r = get(app.port(), "/");
    ASSERT_TRUE(r) << app.log();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("Connection"), "close");
    // SIGUSR1 is still heard during the delay.
    ASSERT_EQ(::kill(app.pid(), SIGUSR1), 0);
    EXPECT_TRUE(wait_until([&] { return app.log().find("reopening the access log") != std::string::npos; }))
        << app.log();
    ASSERT_EQ(::kill(app.pid(), SIGTERM), 0);
    EXPECT_TRUE(wait_until([&] { return app.log().find("stopping now") != std::string::npos; })) << app.log();
    ASSERT_TRUE(wait_until([&] { return !test_client(app.port(), milliseconds(500)).connected(); }));
    EXPECT_EQ(app.stop(), 0) << app.log();
}

TEST(operations, sigusr1_reopens_the_access_log) {
    const std::string path =
        ::testing::TempDir() + "sluice_e2e_access_" + std::to_string(::getpid()) + ".log";
    std::remove(path.c_str());
    std::remove((path + ".1").c_str());
    app_process app(SLUICE_HELLO_BIN, {"--set", "access_log.path=" + path});
    ASSERT_TRUE(app.started()) << app.error();
    ASSERT_TRUE(get(app.port(), "/?before"));
    ASSERT_TRUE(wait_until([&] { return read_file(path).find("/?before") != std::string::npos; }));
    ASSERT_EQ(std::rename(path.c_str(), (path + ".1").c_str()), 0);
    ASSERT_EQ(::kill(app.pid(), SIGUSR1), 0);
    ASSERT_TRUE(wait_until([&] { return app.log().find("reopening the access log") != std::string::npos; }));
    ASSERT_TRUE(get(app.port(), "/?after"));
    EXPECT_TRUE(wait_until([&] { return read_file(path).find("/?after") != std::string::npos; }))
        << app.log();
    EXPECT_EQ(read_file(path + ".1").find("/?after"), std::string::npos);
    EXPECT_EQ(app.stop(), 0);
    std::remove(path.c_str());
    std::remove((path + ".1").c_str());
}

// certbot's deploy hook: new files in place, then kill -HUP. The next handshake shows the new
// certificate; a SIGHUP with a bad file keeps the running one and the process.
TEST(operations, sighup_reloads_the_tls_certificate) {
    const test_certs old_certs;
    const test_certs new_certs;
    const std::string cert = old_certs.dir() + "/live-cert.pem";
    const std::string key = old_certs.dir() + "/live-key.pem";
    const auto install = [&](const test_certs& c) {
        std::filesystem::copy_file(c.cert_path(), cert, std::filesystem::copy_options::overwrite_existing);
        std::filesystem::copy_file(c.key_path(), key, std::filesystem::copy_options::overwrite_existing);
    };
    install(old_certs);
    app_process app(SLUICE_HELLO_BIN, {"--set", "tls.cert=" + cert, "--set", "tls.key=" + key});
    ASSERT_TRUE(app.started()) << app.error();
    EXPECT_EQ(tls_probe(app.port(), {}).serial, old_certs.serial());

    old_certs.write_file("live-cert.pem", "broken\n");
    ASSERT_EQ(::kill(app.pid(), SIGHUP), 0);
    ASSERT_TRUE(wait_until([&] { return app.log().find("TLS reload failed") != std::string::npos; }))
        << app.log();
    EXPECT_EQ(tls_probe(app.port(), {}).serial, old_certs.serial());

    install(new_certs);
    ASSERT_EQ(::kill(app.pid(), SIGHUP), 0);
    ASSERT_TRUE(wait_until([&] { return app.log().find("TLS certificates reloaded") != std::string::npos; }))
        << app.log();
    const tls_probe_result after = tls_probe(app.port(), {});
    EXPECT_TRUE(after.answered) << after.error;
    EXPECT_EQ(after.serial, new_certs.serial());
    EXPECT_EQ(app.stop(), 0);
}

} // namespace
} // namespace sluice::test
