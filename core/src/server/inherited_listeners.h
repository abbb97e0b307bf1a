// Listening sockets a server did not bind itself: systemd socket activation (sd_listen_fds(3):
// LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES) or a hand-over (handover.h). Each is checked against
// the address the configuration names before the server accepts on it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/handover.h"
#include "server/socket_util.h"

namespace sluice::detail {

/// "" when fd is a listening TCP socket bound to `want` (any port when want's port is 0), and
/// makes it non-blocking and close-on-exec; else why not.
std::string check_inherited(int fd, const socket_address& want);

/// The descriptors systemd passed to this process, by role: named "admin" in LISTEN_FDNAMES,
/// or bound to admin.listen's address, is the admin listener; named "tls", or bound to
/// tls.listen's address, is the TLS listener; every other one is a public one (`listen`).
/// A role name wins over the address.
/// Empty when LISTEN_PID does not name this process. Unsets the variables (so processes this
/// one starts do not take them for theirs). Throws startup_error("LISTEN_FDS") for bad values.
std::vector<handed_fd> systemd_listeners(std::span<const char* const> environment, const socket_address& main,
                                         const socket_address* admin, const socket_address* tls = nullptr);

/// The descriptors of one role.
std::vector<int> fds_of(std::span<const handed_fd> fds, listener_role role);

} // namespace sluice::detail
