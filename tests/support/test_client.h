// A loopback HTTP/1.1 client for tests: raw bytes out, parsed responses in, and a deadline on
// every wait (poll-based, non-blocking socket), so a misbehaving server fails a test instead
// of hanging it.
//
//   test_client c(port);
//   ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) << c.error();
//   auto r = c.read_response();
//   ASSERT_TRUE(r) << c.error();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/deadline.h"
#include "support/http_response.h"
#include "support/tls_stream.h"

namespace sluice::test {

/// What a test_client speaks: TLS when the port belongs to a TLS test_server (the {tls} rows of
/// the matrix run every case over TLS), or plaintext / TLS whatever the port is.
enum class client_transport { automatic, plain, tls };
/// When a TLS client handshakes: in the constructor, or inside its first send or read (for
/// tests about connections the server has not taken yet: a handshake needs the server).
enum class client_handshake { at_connect, on_first_io };

/// Socket options set before the connect (0: the kernel's default).
struct client_socket_options {
    int rcvbuf = 0; ///< SO_RCVBUF
    int mss = 0;    ///< TCP_MAXSEG: the peer's segments, and so its send buffer's autotuning, follow it
};

class test_client {
public:
    /// Connects to 127.0.0.1:port (and handshakes, over TLS); check connected() / error().
    explicit test_client(std::uint16_t port, std::chrono::milliseconds timeout = default_timeout,
                         client_transport transport = client_transport::automatic,
                         client_handshake handshake = client_handshake::at_connect,
                         client_socket_options options = {});
    ~test_client();
    test_client(const test_client&) = delete;
    test_client& operator=(const test_client&) = delete;

    bool connected() const noexcept { return fd_ >= 0; }
    /// Why the last operation failed (with the bytes buffered so far).
    const std::string& error() const noexcept { return error_; }
    /// Bounds each later wait.
    void set_timeout(std::chrono::milliseconds t) noexcept { timeout_ = t; }

    /// Sends all bytes (one write where the kernel allows).
    bool send(std::string_view bytes);
    /// Sends in pieces of `piece` bytes, pausing `pause` between them so that each piece
    /// arrives in its own segment (TCP_NODELAY is set).
    bool send_split(std::string_view bytes, std::size_t piece,
                    std::chrono::milliseconds pause = std::chrono::milliseconds(1));

    /// Reads the next response (an interim 1xx included: it comes back on its own).
    std::optional<http_response> read_response(body_rule rule = body_rule::normal);
    /// Reads n responses in order (all GET-like).
    std::vector<http_response> read_responses(std::size_t n);
    /// Reads until the buffered, unparsed bytes contain `text` (streaming responses).
    bool read_until_contains(std::string_view text);

    /// Waits until the server closes the connection (EOF or reset). Bytes that arrive first
    /// are kept in buffered().
    bool wait_closed();
    /// Reads whatever arrives during `window`; returns how many new bytes. Stops early at EOF.
    std::size_t read_for(std::chrono::milliseconds window);
    /// Waits at most `wait` for bytes and moves out what has arrived (plaintext, over TLS
    /// too): "" on a timeout or at the end of the stream (peer_closed() tells which). For
    /// tests that pace their own reading.
    std::string read_available(std::chrono::milliseconds wait);
    /// Received, not yet parsed into a response.
    const std::string& buffered() const noexcept { return in_; }
    /// The server closed (EOF or reset) as seen so far.
    bool peer_closed() const noexcept { return eof_; }
    /// The server's close was an orderly one: a FIN (plaintext) or close_notify (TLS), not a
    /// reset or a truncation. Meaningful once peer_closed().
    bool ended_cleanly() const noexcept { return clean_end_; }

    /// Closes with FIN.
    void close_clean() noexcept;
    /// Closes with RST (SO_LINGER 0): the server sees a reset, not an orderly close.
    void close_abortive() noexcept;
    /// Half-closes: no more bytes from us, responses still readable.
    void shutdown_write() noexcept;

    int fd() const noexcept { return fd_; }
    /// The TLS session, or null on a plaintext connection.
    tls_stream* tls() const noexcept { return tls_.get(); }

private:
    enum class fill { data, eof, timeout, failed };
    fill fill_once(test_clock::time_point deadline);
    /// Polls for `events` until the deadline: data when ready, else timeout or failed.
    fill await_ready(short events, test_clock::time_point deadline);
    bool write_all(std::string_view bytes, test_clock::time_point deadline);
    void fail(std::string what);

    int fd_ = -1;
    std::unique_ptr<tls_stream> tls_;
    std::chrono::milliseconds timeout_;
    std::string in_;
    bool eof_ = false;
    bool clean_end_ = false;
    std::string error_;
};

/// "GET <target> HTTP/1.1" with Host and any extra header lines ("Name: v\r\n" each).
std::string get_request(std::string_view target, std::string_view extra_headers = {});
/// A request with a Content-Length body.
std::string body_request(std::string_view method, std::string_view target, std::string_view body,
                         std::string_view extra_headers = {});

} // namespace sluice::test
