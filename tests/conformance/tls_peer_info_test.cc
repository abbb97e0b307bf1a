// request::tls(): what a handler learns about its connection's TLS. On every row a plaintext
// connection has none and a TLS one a description made once per connection; on every TLS row
// the client certificate (tls.verify_client = optional / require), the SNI name, the version,
// and the same description after a suspension, a resume on another thread and a reload.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <sluice/exchange.h>
#include <sluice/tls_info.h>

#include "support/backend_matrix.h"
#include "support/test_certs.h"
#include "support/test_client.h"
#include "support/tls_probe.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

std::string address_of(const tls_info* t) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", static_cast<const void*>(t));
    return text;
}

// One "key=value" line per field, so that a test looks for whole lines.
std::string describe(const request& req) {
    const tls_info* t = req.tls();
    if (t == nullptr) {
        return "plain\n";
    }
    std::string out = "version=" + t->version + "\ncipher=" + t->cipher + "\nsni=" + t->server_name +
                      "\nresumed=" + (t->resumed ? "1" : "0") + "\n";
    if (const auto& c = t->client_certificate) {
        out += "subject=" + c->subject + "\nissuer=" + c->issuer + "\nserial=" + c->serial +
               "\nsha256=" + c->sha256 + "\nverified=" + (c->verified ? "1" : "0") + "\n";
    } else {
        out += "certificate=none\n";
    }
    return out;
}

std::string describe_subject(const tls_info* t) {
    return t != nullptr && t->client_certificate ? t->client_certificate->subject : std::string("none");
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
        ++n;
    }
    return n;
}

// ---------------------------------------------------------------------------------------------
// Every row: plaintext or TLS.

class request_tls_test : public backend_test {};

TEST_P(request_tls_test, plaintext_has_none_and_tls_one_per_connection) {
    srv().route("GET", "/", [](exchange& ex) {
        const tls_info* t = ex.request().tls();
        ex.response().text(t == nullptr ? std::string("plain") : t->version + " " + address_of(t));
    });
    srv().start();
    test_client c(srv().port());
    ASSERT_TRUE(c.connected()) << c.error();
    // Two exchanges of one keep-alive connection share the description made at its handshake.
    ASSERT_TRUE(c.send(get_request("/") + get_request("/"))) << c.error();
    const auto rs = c.read_responses(2);
    ASSERT_EQ(rs.size(), 2u) << c.error();
    if (!over_tls()) {
        EXPECT_EQ(rs[0].body, "plain");
        EXPECT_EQ(rs[1].body, "plain");
        return;
    }
    EXPECT_TRUE(rs[0].body.starts_with("TLSv1.")) << rs[0].body;
    EXPECT_EQ(rs[0].body, rs[1].body);
}

SLUICE_BACKEND_SUITE(request_tls_test);

// ---------------------------------------------------------------------------------------------
// TLS rows: the client certificate, SNI, version.

class tls_peer_info_test : public backend_test {
protected:
    const test_certs ca_{cert_spec{.common_name = "client CA", .san = ""}};
    const test_certs alice_{cert_spec{.common_name = "alice", .san = "", .issuer = &ca_, .ca = false}};

    void start(tls_verify_client mode) {
        if (mode != tls_verify_client::off) {
            srv().config().tls.client_ca = ca_.cert_path(); // a startup error with "off"
        }
        srv().config().tls.verify_client = mode;
        srv().route("GET", "/", [](exchange& ex) { ex.response().text(describe(ex.request())); });
        srv().start();
    }

    tls_probe_result probe(tls_probe_options o, const test_certs* cert) {
        if (cert != nullptr) {
            o.client_cert = cert->cert_path();
            o.client_key = cert->key_path();
        }
        return tls_probe(srv().port(), o);
    }

    std::string alice_lines() const {
        return "subject=CN=alice\nissuer=CN=client CA\nserial=" + alice_.serial() +
               "\nsha256=" + alice_.sha256() + "\nverified=1\n";
    }
};

TEST_P(tls_peer_info_test, require_shows_the_certificate_to_every_exchange) {
    start(tls_verify_client::require);
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        const tls_probe_result r = probe({.version = v, .requests = 2}, &alice_);
        ASSERT_TRUE(r.answered) << v << ": " << r.error;
        EXPECT_EQ(count(r.response, alice_lines()), 2u) << r.response;
        EXPECT_EQ(count(r.response, v == TLS1_2_VERSION ? "version=TLSv1.2\n" : "version=TLSv1.3\n"), 2u)
            << r.response;
        EXPECT_EQ(count(r.response, "\ncipher=\n"), 0u) << r.response; // always named
    }
}

TEST_P(tls_peer_info_test, optional_with_a_certificate_and_without) {
    start(tls_verify_client::optional);
    const tls_probe_result with = probe({}, &alice_);
    ASSERT_TRUE(with.answered) << with.error;
    EXPECT_EQ(count(with.response, alice_lines()), 1u) << with.response;
    const tls_probe_result without = probe({}, nullptr);
    ASSERT_TRUE(without.answered) << without.error;
    EXPECT_EQ(count(without.response, "certificate=none\n"), 1u) << without.response;
    EXPECT_EQ(count(without.response, "subject="), 0u) << without.response;
}

TEST_P(tls_peer_info_test, names_are_escaped_as_rfc_2253_says) {
    // RFC 2253 §2.4: a comma or a plus inside a value is escaped, so "CN=Doe\, John\+x" is one RDN.
    const test_certs doe{cert_spec{.common_name = "Doe, John+x", .san = "", .issuer = &ca_, .ca = false}};
    start(tls_verify_client::require);
    const tls_probe_result r = probe({}, &doe);
    ASSERT_TRUE(r.answered) << r.error;
    EXPECT_EQ(count(r.response, "\nsubject=CN=Doe\\, John\\+x\n"), 1u) << r.response;
}

TEST_P(tls_peer_info_test, off_asks_for_no_certificate) {
    start(tls_verify_client::off);
    const tls_probe_result r = probe({}, &alice_); // offered, never asked for
    ASSERT_TRUE(r.answered) << r.error;
    EXPECT_EQ(count(r.response, "certificate=none\n"), 1u) << r.response;
}

TEST_P(tls_peer_info_test, the_sni_name_sent_is_reported) {
    start(tls_verify_client::off);
    const tls_probe_result named = probe({.sni = "api.example.test"}, nullptr);
    ASSERT_TRUE(named.answered) << named.error;
    EXPECT_EQ(count(named.response, "\nsni=api.example.test\n"), 1u) << named.response;
    const tls_probe_result none = probe({}, nullptr);
    ASSERT_TRUE(none.answered) << none.error;
    EXPECT_EQ(count(none.response, "\nsni=\n"), 1u) << none.response;
}

TEST_P(tls_peer_info_test, a_resumed_session_keeps_the_certificate) {
    start(tls_verify_client::require);
    for (const int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
        const tls_probe_result first = probe({.version = v}, &alice_);
        ASSERT_TRUE(first.answered) << v << ": " << first.error;
        const tls_probe_result again = probe({.session = first.session, .version = v}, &alice_);
        ASSERT_TRUE(again.answered) << v << ": " << again.error;
        EXPECT_TRUE(again.reused) << v;
        EXPECT_EQ(count(again.response, "resumed=1\n" + alice_lines()), 1u) << v << ": " << again.response;
    }
}

TEST_P(tls_peer_info_test, the_same_after_a_resume_on_another_thread_and_a_reload) {
    srv().config().tls.client_ca = ca_.cert_path();
    srv().config().tls.verify_client = tls_verify_client::require;
    struct seen {
        std::string on_the_other_thread;
        const tls_info* first = nullptr;
    };
    auto st = std::make_shared<seen>();
    srv().route("GET", "/", [this, st](exchange& ex) {
        if (ex.attribute<int>("round").value_or(0) == 1) {
            const bool same = ex.request().tls() == st->first; // the worker's write is ordered by resume
            ex.response().text(std::string(same ? "same\n" : "different\n") + st->on_the_other_thread);
            return;
        }
        ex.set_attribute("round", 1);
        st->first = ex.request().tls();
        auto ctx = ex.start_async(10s);
        bg_.run([this, ctx, st]() mutable {
            // Certificates reloaded while the exchange waits: its description is its own.
            EXPECT_TRUE(srv().server().reload_tls());
            st->on_the_other_thread = describe_subject(st->first);
            ctx.resume();
        });
    });
    srv().start();
    const tls_probe_result r = probe({}, &alice_);
    ASSERT_TRUE(r.answered) << r.error;
    EXPECT_EQ(count(r.response, "same\nCN=alice"), 1u) << r.response;
}

SLUICE_TLS_BACKEND_SUITE(tls_peer_info_test);

} // namespace
} // namespace sluice::test
