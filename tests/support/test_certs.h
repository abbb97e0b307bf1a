// Certificates made by the test run (never a committed private key): an ECDSA P-256 key and a
// self-signed certificate for "localhost" and 127.0.0.1, written as PEM into a fresh
// directory that is removed with the object.
//
//   test_certs certs;                       // valid from yesterday to tomorrow
//   cfg.tls.cert = certs.cert_path(); cfg.tls.key = certs.key_path();
//
// A cert_spec makes others: another name (SNI), a CA and leaves it signs (client certificates).
//
//   test_certs ca(cert_spec{.common_name = "test CA"});
//   test_certs leaf(cert_spec{.common_name = "alice", .san = "", .issuer = &ca, .ca = false});
#pragma once

#include <chrono>
#include <string>

#include <sluice/config.h>

namespace sluice::test {

class test_certs;

struct cert_spec {
    std::string common_name = "localhost";
    std::string san = "DNS:localhost,IP:127.0.0.1"; ///< subjectAltName; "" = none
    std::chrono::hours not_before = std::chrono::hours(-24);
    std::chrono::hours not_after = std::chrono::hours(24);
    const test_certs* issuer = nullptr; ///< null: self-signed
    bool ca = true;                     ///< basicConstraints CA:TRUE (a self-signed leaf is its own CA)
};

class test_certs {
public:
    explicit test_certs(const cert_spec& spec);
    /// Validity relative to now: [not_before, not_after] (negative values lie in the past).
    explicit test_certs(std::chrono::hours not_before = std::chrono::hours(-24),
                        std::chrono::hours not_after = std::chrono::hours(24));
    ~test_certs();
    test_certs(const test_certs&) = delete;
    test_certs& operator=(const test_certs&) = delete;

    const std::string& cert_path() const noexcept { return cert_; }
    const std::string& key_path() const noexcept { return key_; }
    const std::string& dir() const noexcept { return dir_; }
    /// The certificate's serial number, as OpenSSL prints it (hex).
    const std::string& serial() const noexcept { return serial_; }
    /// A server's TLS settings with this certificate and key, the rest at their defaults.
    tls_config server_tls() const {
        tls_config cfg;
        cfg.cert = cert_;
        cfg.key = key_;
        return cfg;
    }
    /// SHA-256 of the certificate's DER form, lower-case hex.
    const std::string& sha256() const noexcept { return sha256_; }
    /// Writes `text` to a file in dir() and returns its path (bad keys, truncated PEM, ...).
    std::string write_file(const std::string& name, const std::string& text) const;

private:
    std::string dir_;
    std::string cert_;
    std::string key_;
    std::string serial_;
    std::string sha256_;
};

/// The certificates every TLS conformance row uses, made once per test program.
const test_certs& shared_test_certs();

} // namespace sluice::test
