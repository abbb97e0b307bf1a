// What a handler can learn about its connection's TLS: request::tls() (docs/tls.md, "In handlers").
//
// Made once per connection, on its loop thread, when the handshake ends; every exchange of the
// connection shares it (read-only), and it stays valid as long as the request that returned
// it, whichever thread the handler runs or resumes on and whatever a certificate reload does.
#pragma once

#include <optional>
#include <string>

namespace sluice {

/// The certificate a client presented (tls.verify_client = optional or require).
struct tls_client_certificate {
    std::string subject; ///< subject DN, RFC 2253 ("CN=alice,O=Example Corp")
    std::string issuer;  ///< issuer DN, RFC 2253
    std::string serial;  ///< serial number, upper-case hex without leading zeros ("1A2B")
    std::string sha256;  ///< SHA-256 fingerprint of the DER certificate, 64 lower-case hex digits
    /// It chains to tls.client_ca (OpenSSL's verification, validity dates included). Always true
    /// today: the server refuses a handshake whose certificate fails; a handler checks it anyway.
    bool verified = false;
};

/// One TLS connection's negotiated parameters.
struct tls_info {
    std::string version;     ///< "TLSv1.3", "TLSv1.2"
    std::string cipher;      ///< OpenSSL's name: "TLS_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256"
    std::string server_name; ///< the SNI name the client sent; "" when it sent none
    bool resumed = false;    ///< the session was resumed (the certificate below is the session's)
    /// The client's certificate; none when the server did not ask (verify_client = off) or the
    /// client sent none (optional).
    std::optional<tls_client_certificate> client_certificate;
};

} // namespace sluice
