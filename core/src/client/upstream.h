// The resolved addresses of one upstream and their failure marks (nginx fail_timeout).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::detail {

struct upstream_address {
    std::string name; ///< "host:port" as given (without a scheme): the default Host header
    std::string host; ///< the host alone (no brackets): SNI and the certificate's name
    bool tls = false; ///< https://
    sockaddr_storage addr{};
    socklen_t len = 0;
    /// Skipped until this steady-clock time (ns since epoch); written by any loop.
    std::atomic<std::int64_t> failed_until_ns{0};
};

struct upstream_state {
    std::vector<std::string> names;
    std::vector<std::unique_ptr<upstream_address>> addresses;
    std::atomic<std::uint64_t> next{0}; ///< round robin
};

/// Parses "host:port" / "[v6]:port" / "http[s]://host[:port][/]" and resolves it (getaddrinfo);
/// throws std::invalid_argument naming the address.
std::unique_ptr<upstream_address> resolve_address(const std::string& name);

} // namespace sluice::detail
