// The client side of TLS for the test helpers (test_client, multi_client): OpenSSL over a
// non-blocking socket, verifying the server against the certificate the test made. A
// test_server started with tls.cert registers its port here, so that every conformance case
// written for plaintext runs over TLS unchanged on the {tls} rows of the matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "support/deadline.h"

struct ssl_st;

namespace sluice::test {

/// Ports of the running TLS test servers, with the CA file that verifies each.
void register_tls_port(std::uint16_t port, const std::string& ca_file);
void unregister_tls_port(std::uint16_t port);
std::optional<std::string> tls_ca_for_port(std::uint16_t port);

class tls_stream {
public:
    enum class result { ok, want_read, want_write, eof, failed };

    /// Handshakes on a connected non-blocking fd (not owned) before the deadline; null with
    /// the reason in `error` on failure.
    static std::unique_ptr<tls_stream> connect(int fd, const std::string& ca_file,
                                               test_clock::time_point deadline, std::string& error);
    /// Attaches to a non-blocking fd (not owned, connected or still connecting) without
    /// handshaking: the first read() or write() runs the handshake and answers want_read /
    /// want_write until it is done, so a caller polling many connections never waits on one.
    static std::unique_ptr<tls_stream> attach(int fd, const std::string& ca_file, std::string& error);
    ~tls_stream();
    tls_stream(const tls_stream&) = delete;
    tls_stream& operator=(const tls_stream&) = delete;

    result read(char* buf, std::size_t len, std::size_t& got);
    result write(const char* buf, std::size_t len, std::size_t& put);
    /// Sends close_notify (best effort, non-blocking).
    void close_notify();
    /// Whether the server's close_notify was read: its end is then not a truncation.
    bool close_notify_received() const noexcept;
    /// The last OpenSSL error, as text.
    const std::string& error() const noexcept { return error_; }
    ssl_st* native() const noexcept { return ssl_; }

private:
    tls_stream() = default;
    result classify(int rc);

    ssl_st* ssl_ = nullptr;
    std::string error_;
};

} // namespace sluice::test
