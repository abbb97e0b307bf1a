// One TLS connection with the knobs the server-side TLS tests turn (tests/conformance/tls_*):
// an SNI name, a session to resume, a protocol version, a client certificate. It handshakes,
// sends one GET (or several, pipelined) and reads the answers to the end, then reports what the server did:
// whether it resumed, which certificate it showed, what it answered.
//
//   tls_probe_result first = tls_probe(port, {});
//   tls_probe_result again = tls_probe(port, {.session = first.session});
//   EXPECT_TRUE(again.reused);
#pragma once

#include <cstdint>
#include <memory>
#include <string>

struct ssl_session_st;

namespace sluice::test {

using tls_session = std::shared_ptr<ssl_session_st>;

struct tls_probe_options {
    std::string sni{};         ///< server name sent; "" = no SNI extension
    tls_session session{};     ///< resume this session (from an earlier probe)
    int version = 0;           ///< TLS1_2_VERSION / TLS1_3_VERSION to pin one; 0 = any
    std::string client_cert{}; ///< PEM files of a client certificate to offer; "" = none
    std::string client_key{};
    std::string path = "/"; ///< what the GET asks for
    int requests = 1;       ///< GETs sent at once on the connection (keep-alive, the last one closes)
};

struct tls_probe_result {
    bool handshake_done = false; ///< the client side finished the handshake
    bool answered = false;       ///< an HTTP response arrived after it
    bool reused = false;         ///< SSL_session_reused
    std::string subject_cn;      ///< of the certificate the server showed
    std::string serial;          ///< of that certificate (hex, as BN_bn2hex prints it)
    std::string response;        ///< the whole response, head and body
    std::string error;           ///< why not, when something failed
    tls_session session;         ///< the session, to resume in a later probe
};

/// Connects to 127.0.0.1:port and runs options.requests exchanges, every step bounded by a 10 s socket
/// timeout.
tls_probe_result tls_probe(std::uint16_t port, const tls_probe_options& options);

} // namespace sluice::test
