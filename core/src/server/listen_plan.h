// Where a server listens: `listen`, and tls.listen beside it when set (docs/tls.md, "Plaintext
// and TLS in one server"). What a listening socket speaks is decided here, once per socket, and
// travels with its descriptor: through the runtimes to each connection accepted on it
// (adopt_connection), and through a hand-over to the process that takes the socket over.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/handover.h"
#include "server/socket_util.h"

namespace sluice::detail {

/// What the connections accepted on a listening socket speak.
enum class listener_kind { plain, tls };

/// One listening socket with what it speaks and which configured listener it is: what a
/// hand-over sends. The role, not the kind, names the listener on the wire: with tls.cert alone,
/// `listen` (role main) speaks TLS; with tls.listen, main is plaintext and role tls is TLS.
struct listening_socket {
    int fd = -1;
    listener_kind kind = listener_kind::plain;
    listener_role role = listener_role::main;
};

/// One configured address: bound by the runtime, or served from sockets inherited for it.
struct listen_endpoint {
    socket_address addr;
    listener_kind kind = listener_kind::plain;
    listener_role role = listener_role::main;
    std::string_view key = "listen"; ///< the configuration key, for errors: "listen", "tls.listen"
    std::vector<int> adopted;        ///< inherited sockets for this address, owned; empty: bind
};

/// Endpoint 0 is always `listen`; endpoint 1, when present, is tls.listen.
using listen_plan = std::vector<listen_endpoint>;
inline constexpr std::size_t max_listen_endpoints = 2;

/// open_listener() for an endpoint: a startup_error names the endpoint's key.
int open_endpoint_listener(const listen_endpoint& e, const socket_address& addr, reuse_port reuse,
                           int backlog);

/// Closes every adopted descriptor of the plan (a start that failed before taking them).
void close_adopted(listen_plan& plan) noexcept;

} // namespace sluice::detail
