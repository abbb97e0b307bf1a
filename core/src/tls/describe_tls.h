// The sluice::tls_info of a server-side connection whose handshake just ended (tls_driver).
#pragma once

#include <memory>

#include <sluice/tls_info.h>

struct ssl_st;

namespace sluice::detail {

/// Reads the negotiated version and cipher, the SNI name and the client's certificate from
/// `ssl`. Runs on the connection's loop thread at the handshake's end, the only time the SSL is
/// known to be idle and consistent; handlers read the result later from any thread. Throws
/// std::bad_alloc.
std::shared_ptr<const tls_info> describe_tls(ssl_st* ssl);

} // namespace sluice::detail
