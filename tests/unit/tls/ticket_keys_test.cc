// Session ticket keys (tls/ticket_keys.*) through a real handshake in memory (a BIO pair, no
// socket): a ticket resumes under the current key and under the previous one (renewed), not
// after a second rotation; the period rotates the keys by itself. A ClientHello with a ticket
// is never looked up in the TLS 1.2 session cache (OpenSSL ssl_get_prev_session), so the
// cache cannot make a retired ticket look resumed.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "support/test_certs.h"
#include "tls/ticket_keys.h"
#include "tls/tls_context.h"

namespace sluice::test {
namespace {

struct handshake_result {
    bool done = false;
    bool reused = false;
    std::shared_ptr<SSL_SESSION> session;
    bool new_ticket = false; // the server sent a ticket for this session
};

std::string ticket_of(const SSL_SESSION* s) {
    const unsigned char* data = nullptr;
    std::size_t len = 0;
    SSL_SESSION_get0_ticket(s, &data, &len);
    return std::string(reinterpret_cast<const char*>(data), len);
}

// Runs a client against a server SSL made by ctx, over a BIO pair, until both are idle.
handshake_result handshake(detail::tls_context& ctx, int version, SSL_SESSION* resume) {
    handshake_result out;
    SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(client_ctx, version);
    SSL_CTX_set_max_proto_version(client_ctx, version);
    SSL* client = SSL_new(client_ctx);
    SSL* server = ctx.new_ssl();
    BIO* client_bio = nullptr;
    BIO* server_bio = nullptr;
    BIO_new_bio_pair(&client_bio, 0, &server_bio, 0);
    SSL_set_bio(client, client_bio, client_bio);
    SSL_set_bio(server, server_bio, server_bio);
    SSL_set_connect_state(client);
    SSL_set_accept_state(server);
    if (resume != nullptr) {
        SSL_set_session(client, resume);
    }
    char byte = 0;
    for (int round = 0; round < 50; ++round) {
        const bool c = SSL_do_handshake(client) == 1;
        const bool s = SSL_do_handshake(server) == 1;
        if (c && s) {
            out.done = true;
            SSL_read(client, &byte, 1); // takes in TLS 1.3 tickets sent after the handshake
            SSL_read(server, &byte, 1);
            SSL_read(client, &byte, 1);
            break;
        }
    }
    out.reused = SSL_session_reused(client) == 1;
    // OpenSSL marks a session not resumable when its SSL is freed without close_notify sent
    // (ssl_clear_bad_session): shut down cleanly on both sides.
    SSL_shutdown(client);
    SSL_shutdown(server);
    out.session.reset(SSL_get1_session(client), SSL_SESSION_free);
    out.new_ticket = resume != nullptr && out.session && ticket_of(out.session.get()) != ticket_of(resume);
    SSL_free(client);
    SSL_free(server);
    SSL_CTX_free(client_ctx);
    return out;
}

class ticket_keys_test : public ::testing::TestWithParam<int> {};

TEST_P(ticket_keys_test, a_ticket_resumes_after_one_rotation_not_after_two) {
    detail::tls_context ctx(shared_test_certs().server_tls());
    const handshake_result first = handshake(ctx, GetParam(), nullptr);
    ASSERT_TRUE(first.done);
    ASSERT_TRUE(first.session);
    ASSERT_EQ(SSL_SESSION_has_ticket(first.session.get()), 1);

    const handshake_result same_key = handshake(ctx, GetParam(), first.session.get());
    ASSERT_TRUE(same_key.done);
    EXPECT_TRUE(same_key.reused);

    ctx.tickets().rotate();
    const handshake_result previous_key = handshake(ctx, GetParam(), first.session.get());
    ASSERT_TRUE(previous_key.done);
    EXPECT_TRUE(previous_key.reused) << "the previous key must still open tickets";
    EXPECT_TRUE(previous_key.new_ticket) << "a ticket under the previous key is renewed";

    ctx.tickets().rotate();
    const handshake_result retired = handshake(ctx, GetParam(), first.session.get());
    ASSERT_TRUE(retired.done);
    EXPECT_FALSE(retired.reused) << "a ticket two rotations old must not open";

    // The renewed ticket (made under the key that is now the previous one) still resumes.
    const handshake_result renewed = handshake(ctx, GetParam(), previous_key.session.get());
    ASSERT_TRUE(renewed.done);
    EXPECT_TRUE(renewed.reused);
}

TEST_P(ticket_keys_test, the_period_retires_keys_without_a_call) {
    detail::tls_context ctx(shared_test_certs().server_tls(), std::chrono::seconds(1));
    const handshake_result first = handshake(ctx, GetParam(), nullptr);
    ASSERT_TRUE(first.session);
    // Two periods pass: time itself is what is tested, so the test waits for it.
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    const handshake_result late = handshake(ctx, GetParam(), first.session.get());
    ASSERT_TRUE(late.done);
    EXPECT_FALSE(late.reused);
}

TEST_P(ticket_keys_test, a_reload_keeps_tickets_valid) {
    detail::tls_context ctx(shared_test_certs().server_tls());
    const handshake_result first = handshake(ctx, GetParam(), nullptr);
    ASSERT_TRUE(first.session);
    ctx.reload();
    const handshake_result after = handshake(ctx, GetParam(), first.session.get());
    ASSERT_TRUE(after.done);
    EXPECT_TRUE(after.reused);
}

std::string version_name(const ::testing::TestParamInfo<int>& p) {
    return p.param == TLS1_2_VERSION ? "tls12" : "tls13";
}

INSTANTIATE_TEST_SUITE_P(versions, ticket_keys_test, ::testing::Values(TLS1_2_VERSION, TLS1_3_VERSION),
                         version_name);

} // namespace
} // namespace sluice::test
