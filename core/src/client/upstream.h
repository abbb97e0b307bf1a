// An upstream's addresses: the hosts as given (fixed), and the set of resolved addresses to
// connect to (replaced whole by a refresh, upstream_refresher.h), with their failure marks
// (nginx fail_timeout).
//
// The set is immutable once published: a pool takes a shared_ptr to the current one and
// indexes only into that, so a refresh that shrinks the set on another thread can never put
// an index out of range. An address that is still resolved after a refresh is the same object
// in the new set, so its failure mark survives; one that is gone is marked retired (its
// connections are not reused) and lives until the last connection or set holding it ends.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sluice/client.h>

namespace sluice::detail {

/// One address as given: what a refresh looks up again.
struct upstream_host {
    /// The authority: the Host header of requests to this entry. The host as given (IPv6 in
    /// brackets) and ":port" unless the port is the scheme's default (80, 443; RFC 9110 §4.2.3).
    std::string name;
    std::string host; ///< the host alone (no brackets): SNI, the certificate's name, the lookup
    std::uint16_t port = 0;
    bool tls = false;     ///< https://
    bool literal = false; ///< host is an IP literal: never looked up again
};

/// One resolved address of one host.
struct upstream_address {
    std::size_t host = 0; ///< index into upstream_state::hosts (Host header, TLS session slot)
    sockaddr_storage addr{};
    socklen_t len = 0;
    /// Skipped until this steady-clock time (ns since epoch); written by any loop.
    std::atomic<std::int64_t> failed_until_ns{0};
    /// A refresh no longer resolves it: its connections finish their call and are not reused.
    std::atomic<bool> retired{false};
};

using address_set = std::vector<std::shared_ptr<upstream_address>>;

/// What one lookup gave: the addresses, or nullopt when it failed (`error` says why).
struct lookup_result {
    std::optional<std::vector<std::pair<sockaddr_storage, socklen_t>>> addresses;
    std::string error;
};

class upstream_state {
public:
    upstream_state(std::vector<std::string> names, upstream_options options);

    const std::vector<std::string>& names() const noexcept { return names_; }
    const std::vector<upstream_host>& hosts() const noexcept { return hosts_; }
    const upstream_options& options() const noexcept { return options_; }
    /// Whether a refresh has anything to do: a host name (not a literal) and an interval.
    bool refreshes() const noexcept;

    /// The current set (never empty) and its generation. Any thread; a short lock.
    std::shared_ptr<const address_set> current() const;
    /// Bumped after each publish: a pool reloads current() only when this changed.
    std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

    /// Looks `h` up (the options' resolve function, else getaddrinfo). Blocks: never on a loop.
    lookup_result lookup(const upstream_host& h) const;
    /// Publishes the set made of `results` (one per host; nullopt for a literal, which keeps
    /// its address): a host whose lookup failed keeps its current addresses. Returns whether
    /// the set changed.
    bool apply(const std::vector<std::optional<lookup_result>>& results);

    /// When the addresses were first looked up: the first refresh is one interval later.
    const std::chrono::steady_clock::time_point created_at = std::chrono::steady_clock::now();
    /// Round robin position, shared by every loop's pool: one turn per call that connects
    /// (client_pool::pick_address), never one per address looked at.
    std::atomic<std::uint64_t> next{0};

private:
    std::vector<std::string> names_;
    std::vector<upstream_host> hosts_;
    upstream_options options_;
    mutable std::mutex mu_;
    std::shared_ptr<const address_set> set_;
    std::atomic<std::uint64_t> generation_{0};
};

/// Parses "host:port" / "[v6]:port" / "http[s]://host[:port][/]"; throws std::invalid_argument
/// naming the address.
upstream_host parse_upstream_host(const std::string& given);

} // namespace sluice::detail
