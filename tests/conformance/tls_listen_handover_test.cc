// A zero-downtime restart (docs/operations.md) of a server with both a plaintext and a TLS
// listener (tls.listen): the new process takes over both sockets, each still speaking its own
// protocol, so that a rolling restart keeps both ports working.
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>

#include <sluice/exchange.h>

#include "support/backend_matrix.h"
#include "support/get_body.h"
#include "support/test_client.h"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

class tls_listen_handover_test : public backend_test {
protected:
    void TearDown() override {
        if (next_) {
            next_->stop();
        }
        backend_test::TearDown();
        next_.reset();
        ::unlink(path_.c_str());
    }

    // Answers "<who> plain" or "<who> tls": which server, and over which listener.
    void configure(test_server& s, char who, bool tls_listen) {
        s.config().handover_socket = path_;
        s.config().shutdown_timeout_ms = 2'000;
        if (tls_listen) {
            s.config().tls.listen = "127.0.0.1:0";
        }
        s.route("GET", "/who", [who](exchange& ex) {
            ex.response().text(std::string(1, who) + (ex.request().tls() ? " tls" : " plain"));
        });
    }

    bool stops_by_itself(test_server& s) {
        auto done = std::make_shared<std::atomic<bool>>(false);
        bg_.run([&s, done] {
            s.server().wait();
            *done = true;
        });
        return wait_until([&] { return done->load(); }, milliseconds(10'000));
    }

    static std::string fresh_path() {
        static std::atomic<int> n{0};
        return "/tmp/sluice-tlho-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
    }

    std::string path_ = fresh_path();
    std::unique_ptr<test_server> next_;
};

TEST_P(tls_listen_handover_test, both_listeners_are_handed_over_and_keep_their_protocols) {
    configure(srv(), 'A', true);
    srv().start();
    const std::uint16_t plain = srv().port();
    const std::uint16_t tls = srv().server().tls_port();
    ASSERT_NE(tls, 0);
    EXPECT_EQ(get_body(plain, "/who", client_transport::plain), "A plain");
    EXPECT_EQ(get_body(tls, "/who", client_transport::tls), "A tls");

    next_ = make_server();
    configure(*next_, 'B', true);
    next_->start();
    EXPECT_TRUE(next_->log().contains("adopted")) << "B bound instead of taking over";
    EXPECT_EQ(next_->port(), plain);
    EXPECT_EQ(next_->server().tls_port(), tls);
    EXPECT_TRUE(stops_by_itself(srv())) << "the old server did not stop after handing over";

    EXPECT_EQ(get_body(plain, "/who", client_transport::plain), "B plain");
    EXPECT_EQ(get_body(tls, "/who", client_transport::tls), "B tls");
    test_client wrong(tls, default_timeout, client_transport::plain);
    ASSERT_TRUE(wrong.send(get_request("/who"))) << wrong.error();
    auto r = wrong.read_response();
    ASSERT_TRUE(r) << wrong.error();
    EXPECT_EQ(r->status, 400) << "the handed-over TLS socket answered plaintext";
}

TEST_P(tls_listen_handover_test, a_restart_that_adds_tls_listen_takes_the_plain_port_and_binds_the_tls_one) {
    // The old server is plaintext only (no tls.cert); the new one adds a TLS port. It finds no
    // TLS socket in the hand-over and binds one, while `listen` is taken over as before.
    srv().config().tls.cert.clear();
    srv().config().tls.key.clear();
    configure(srv(), 'A', false);
    srv().start();
    const std::uint16_t plain = srv().port();

    next_ = make_server();
    configure(*next_, 'B', true);
    next_->start();
    EXPECT_EQ(next_->port(), plain);
    ASSERT_NE(next_->server().tls_port(), 0);
    EXPECT_TRUE(stops_by_itself(srv()));
    EXPECT_EQ(get_body(plain, "/who", client_transport::plain), "B plain");
    EXPECT_EQ(get_body(next_->server().tls_port(), "/who", client_transport::tls), "B tls");
}

SLUICE_TLS_BACKEND_SUITE(tls_listen_handover_test);

} // namespace
} // namespace sluice::test
