// Many loopback connections driven by one thread with poll(): for tests that need hundreds
// of requests in flight at once without hundreds of client threads. A port a TLS test server
// registered is spoken to over TLS, so the same case runs on the {tls} rows of the matrix.
//
//   multi_client mc;
//   for (...) mc.add(port, get_request("/x"));
//   ASSERT_TRUE(mc.send_all(10s)) << mc.first_error();
//   ... the server holds every request ...
//   ASSERT_TRUE(mc.read_all(10s)) << mc.first_error();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/http_response.h"
#include "support/tls_stream.h"

namespace sluice::test {

class multi_client {
public:
    multi_client() = default;
    ~multi_client();
    multi_client(const multi_client&) = delete;
    multi_client& operator=(const multi_client&) = delete;

    /// Opens a non-blocking connection that will send `request`; returns its index.
    std::size_t add(std::uint16_t port, std::string request);
    /// Finishes connecting and sends every request. False on a deadline or an error.
    bool send_all(std::chrono::milliseconds timeout);
    /// Reads one response per connection. False on a deadline or an error.
    bool read_all(std::chrono::milliseconds timeout);

    std::size_t size() const noexcept { return conns_.size(); }
    const std::optional<http_response>& response(std::size_t i) const { return conns_[i].response; }
    std::size_t responses_received() const noexcept;
    /// The first connection's error, with its index, or "" when there is none.
    std::string first_error() const;

private:
    struct conn {
        int fd = -1;
        bool connected = false;
        std::string out;
        std::size_t out_off = 0;
        std::string in;
        std::optional<http_response> response;
        std::string error;
        /// On a port a TLS test server registered (support/tls_stream.h): the handshake runs
        /// inside the first write, and `want` is what OpenSSL waits for (POLLIN / POLLOUT).
        std::unique_ptr<tls_stream> tls;
        short want = 0;
    };
    enum class phase { sending, reading };
    bool drive(phase ph, std::chrono::milliseconds timeout);
    void step_send(conn& c);
    void step_send_tls(conn& c);
    void step_read(conn& c);
    /// Reads what TLS has; true at the end of the stream.
    bool read_tls(conn& c);

    std::vector<conn> conns_;
};

} // namespace sluice::test
