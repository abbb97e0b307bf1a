// What the core itself may do to a sluice::server beyond its public API: the admin listener is
// a server of its own, and a hand-over moves its listening socket too.
#pragma once

#include <vector>

namespace sluice {
class server;
}

namespace sluice::detail {

struct server_access {
    /// Before start(): accept on these (checked, owned from here on) instead of binding.
    static void adopt(server& s, std::vector<int> fds);
    /// The listening sockets while serving.
    static std::vector<int> listening_fds(const server& s);
    /// Stops as after a hand-over: idle keep-alive connections get one more response.
    static void stop_after_handover(server& s) noexcept;
};

} // namespace sluice::detail
