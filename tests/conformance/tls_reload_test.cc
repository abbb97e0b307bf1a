// Certificate reload (SIGHUP → server::reload_tls()) on every TLS row: 1,000 TLS connections
// open across the reload all answer afterwards; a new handshake gets the new certificate; a
// bad new file is logged and the old certificate keeps serving.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/multi_client.h"
#include "support/test_certs.h"
#include "support/test_client.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class tls_reload_test : public backend_test {
protected:
    const test_certs old_;
    const test_certs new_;
    const std::string cert_ = old_.dir() + "/live-cert.pem";
    const std::string key_ = old_.dir() + "/live-key.pem";

    // What a renewal does to the files the server was configured with.
    void install(const test_certs& certs) {
        std::filesystem::copy_file(certs.cert_path(), cert_,
                                   std::filesystem::copy_options::overwrite_existing);
        std::filesystem::copy_file(certs.key_path(), key_, std::filesystem::copy_options::overwrite_existing);
    }

    void configure() {
        install(old_);
        srv().config().tls.cert = cert_;
        srv().config().tls.key = key_;
    }

    std::string serial_now() {
        const tls_probe_result r = tls_probe(srv().port(), {});
        EXPECT_TRUE(r.answered) << r.error;
        return r.serial;
    }
};

TEST_P(tls_reload_test, thousand_open_connections_survive_and_new_ones_get_the_new_certificate) {
    constexpr std::size_t connections = 1000;
    configure();
    // 1,000 handshakes at once take longer than the 10 s default under TSan on two shared
    // cores; this test is about the reload, not the handshake deadline.
    srv().config().tls.handshake_timeout_ms = 120'000;
    srv().config().limits.header_timeout_ms = 120'000; // it runs from the accept, handshake included
    srv().config().io_threads = 2;
    srv().config().blocking.threads = static_cast<std::uint32_t>(connections) + 16;
    srv().config().blocking.accept_queue = 256;
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().route("GET", "/held/{i}", [this](exchange& ex) {
        auto ctx = ex.start_async(milliseconds(60'000));
        ctx.set_attribute("i", std::string(ex.request().path_param("i").value_or("?")));
        contexts_.add(ctx);
    });
    srv().start();
    ASSERT_EQ(serial_now(), old_.serial());

    multi_client mc;
    for (std::size_t i = 0; i < connections; ++i) {
        mc.add(srv().port(), get_request("/held/" + std::to_string(i)));
    }
    ASSERT_TRUE(mc.send_all(milliseconds(30'000)))
        << mc.first_error() << " (connections refused: " << srv().stats().connections_refused << ")";
    ASSERT_TRUE(srv().wait_suspended(connections, milliseconds(30'000)))
        << "suspended: " << srv().stats().exchanges_suspended << " of " << connections;

    install(new_);
    ASSERT_TRUE(srv().server().reload_tls());
    EXPECT_TRUE(srv().log().contains("TLS certificates reloaded"));
    EXPECT_EQ(serial_now(), new_.serial());
    EXPECT_EQ(mc.responses_received(), 0u);

    auto all = contexts_.take_all();
    ASSERT_EQ(all.size(), connections);
    for (auto& ctx : all) {
        EXPECT_TRUE(
            ctx.complete(response(200).text("answer " + ctx.attribute<std::string>("i").value_or("?"))));
    }
    ASSERT_TRUE(mc.read_all(milliseconds(30'000)))
        << mc.first_error() << " (" << mc.responses_received() << " of " << connections << " answered)";
    for (std::size_t i = 0; i < connections; ++i) {
        ASSERT_TRUE(mc.response(i).has_value()) << i;
        EXPECT_EQ(mc.response(i)->body, "answer " + std::to_string(i)) << i;
    }
    EXPECT_TRUE(srv().wait_exchanges_freed());
}

TEST_P(tls_reload_test, a_bad_new_file_is_logged_and_the_old_certificate_stays) {
    configure();
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();

    old_.write_file("live-cert.pem", "not a certificate\n");
    EXPECT_FALSE(srv().server().reload_tls());
    EXPECT_TRUE(srv().log().contains("TLS reload failed, keeping the current certificates: tls.cert"));
    EXPECT_EQ(serial_now(), old_.serial());

    // Half a renewal: the new certificate with the old key.
    std::filesystem::copy_file(new_.cert_path(), cert_, std::filesystem::copy_options::overwrite_existing);
    EXPECT_FALSE(srv().server().reload_tls());
    EXPECT_TRUE(srv().log().contains("does not match the certificate"));
    EXPECT_EQ(serial_now(), old_.serial());

    install(new_);
    EXPECT_TRUE(srv().server().reload_tls());
    EXPECT_EQ(serial_now(), new_.serial());
}

TEST_P(tls_reload_test, reloads_while_handshakes_run_keep_every_connection_served) {
    configure();
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    // Contexts swapped under the loops' accept path (tsan checks the hand-off).
    std::atomic<bool> done{false};
    std::thread reloader([&] {
        bool flip = false;
        while (!done.load()) {
            install(flip ? old_ : new_);
            srv().server().reload_tls(); // may fail between the two copies: the old one stays
            flip = !flip;
        }
    });
    for (int i = 0; i < 40; ++i) {
        const tls_probe_result r = tls_probe(srv().port(), {});
        EXPECT_TRUE(r.answered) << i << ": " << r.error;
        EXPECT_TRUE(r.serial == old_.serial() || r.serial == new_.serial()) << r.serial;
    }
    done = true;
    reloader.join();
}

// A session (an id, or a ticket: the ticket keys outlive a reload) carries the client
// certificate that was verified when it was made. After a reload that changes tls.client_ca, a
// certificate of the removed CA must not get in by resuming such a session: its session id
// context no longer matches (OpenSSL checks it for cached sessions and for tickets alike), so
// the client does a full handshake, and the new CA refuses its certificate.
TEST_P(tls_reload_test, a_reload_that_changes_client_ca_resumes_no_session_verified_under_the_old_ca) {
    const test_certs ca_a{cert_spec{.common_name = "client CA A", .san = ""}};
    const test_certs alice{cert_spec{.common_name = "alice", .san = "", .issuer = &ca_a, .ca = false}};
    const test_certs ca_b{cert_spec{.common_name = "client CA B", .san = ""}};
    const test_certs bob{cert_spec{.common_name = "bob", .san = "", .issuer = &ca_b, .ca = false}};
    const std::string client_ca = old_.dir() + "/live-client-ca.pem";
    std::filesystem::copy_file(ca_a.cert_path(), client_ca,
                               std::filesystem::copy_options::overwrite_existing);
    configure();
    srv().config().tls.client_ca = client_ca;
    srv().config().tls.verify_client = tls_verify_client::require;
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();

    const auto with = [](const test_certs& cert, int version, tls_session session = {}) {
        return tls_probe_options{.session = std::move(session),
                                 .version = version,
                                 .client_cert = cert.cert_path(),
                                 .client_key = cert.key_path()};
    };
    const std::vector<int> versions = {TLS1_2_VERSION, TLS1_3_VERSION};
    std::vector<tls_session> sessions;
    for (const int v : versions) {
        const tls_probe_result first = tls_probe(srv().port(), with(alice, v));
        ASSERT_TRUE(first.answered) << v << ": " << first.error;
        // Before the reload a session resumes: the test can tell a resumption from a full handshake.
        const tls_probe_result again = tls_probe(srv().port(), with(alice, v, first.session));
        ASSERT_TRUE(again.answered) << v << ": " << again.error;
        ASSERT_TRUE(again.reused) << v;
        sessions.push_back(again.session);
    }

    std::filesystem::copy_file(ca_b.cert_path(), client_ca,
                               std::filesystem::copy_options::overwrite_existing);
    ASSERT_TRUE(srv().server().reload_tls());
    for (std::size_t i = 0; i < versions.size(); ++i) {
        const tls_probe_result after = tls_probe(srv().port(), with(alice, versions[i], sessions[i]));
        EXPECT_FALSE(after.reused) << versions[i] << ": a session verified under the removed CA resumed";
        EXPECT_FALSE(after.answered) << versions[i] << ": a certificate of the removed CA was served";
        const tls_probe_result fresh = tls_probe(srv().port(), with(alice, versions[i]));
        EXPECT_FALSE(fresh.answered) << versions[i] << ": the removed CA still verifies";
        const tls_probe_result trusted = tls_probe(srv().port(), with(bob, versions[i]));
        EXPECT_TRUE(trusted.answered) << versions[i] << ": " << trusted.error;
    }
}

// The same files again (a reload with nothing changed, or a renewal of the server certificate
// alone): what verification depends on is the same, so sessions go on resuming.
TEST_P(tls_reload_test, a_reload_that_keeps_client_ca_keeps_sessions_resumable) {
    const test_certs ca{cert_spec{.common_name = "client CA", .san = ""}};
    const test_certs alice{cert_spec{.common_name = "alice", .san = "", .issuer = &ca, .ca = false}};
    configure();
    srv().config().tls.client_ca = ca.cert_path();
    srv().config().tls.verify_client = tls_verify_client::require;
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        const tls_probe_options o{
            .version = v, .client_cert = alice.cert_path(), .client_key = alice.key_path()};
        const tls_probe_result first = tls_probe(srv().port(), o);
        ASSERT_TRUE(first.answered) << v << ": " << first.error;
        install(new_);
        ASSERT_TRUE(srv().server().reload_tls());
        tls_probe_options again = o;
        again.session = first.session;
        const tls_probe_result r = tls_probe(srv().port(), again);
        EXPECT_TRUE(r.answered) << v << ": " << r.error;
        EXPECT_TRUE(r.reused) << v << ": a reload that changed nothing verification uses ended resumption";
    }
}

SLUICE_TLS_BACKEND_SUITE(tls_reload_test);

// A plain server has nothing to reload: it says so and keeps serving.
class tls_reload_plain_test : public backend_test {};

TEST_P(tls_reload_plain_test, reload_on_a_plain_server_is_refused) {
    srv().route("GET", "/", [](exchange& ex) { ex.response().text("hello"); });
    srv().start();
    EXPECT_FALSE(srv().server().reload_tls());
    EXPECT_TRUE(srv().log().contains("does not speak TLS"));
}

std::vector<backend_param> plain_epoll_rows() {
    std::vector<backend_param> out;
    for (backend_param& p : backend_matrix_of("epoll")) {
        if (p.wire == wire::plain) {
            out.push_back(std::move(p));
        }
    }
    return out;
}

INSTANTIATE_TEST_SUITE_P(backends, tls_reload_plain_test, ::testing::ValuesIn(plain_epoll_rows()),
                         backend_param_name);

} // namespace
} // namespace sluice::test
