// sluice-gateway's shared pieces: the upstream client, the optional limiter, and the two
// conversions every style uses (the upstream request made from the exchange, the upstream
// result made into the downstream response).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/sluice.h>

namespace gateway {

struct gateway {
    gateway(sluice::upstream up, const sluice::client_options& options) : api(std::move(up), options) {}
    sluice::client api;
    std::unique_ptr<sluice::limiter> limit; // null: unlimited
    /// The endpoints behind `limit` (`work`, `files`, `upload`, `bytes`); empty: every one.
    /// S4 guards only the uploads, as the seed's Semaphore(50) did, so reads never wait.
    std::vector<std::string> limited_endpoints;
};

/// How the upstream request holds the incoming body (neither copies it).
enum class body_hold {
    borrow, ///< a view of the request's body: only while the handler waits for the whole call (sync)
    take,   ///< moved into the call (exchange::take_body): the exchange may end (client gone) while
            ///< the call still sends it, and a send in flight keeps the call, and so the body, alive
};

/// The upstream request for `ex`: same method, `upstream_path` with the incoming query, the
/// end-to-end headers plus X-Forwarded-For / Forwarded, and the body as `hold` says.
sluice::client_request upstream_request(sluice::exchange& ex, std::string_view upstream_path, body_hold hold);

/// Suspends `ex` for an upstream call with no deadline of the exchange's own: the client's
/// timeouts bound every phase of the call (acquire, each connect, each response wait, the
/// one stale-connection retry) and answer 504, and once the head went downstream the
/// connection's write timeout bounds a slow reader. The server's async_timeout_ms would
/// otherwise end a slow but timely call with a 503, or cut a long body.
sluice::async_context suspend_for_upstream(sluice::exchange& ex);

/// Answers 400 when the request cannot be forwarded byte-exact and safe (forwarding.h).
bool refused(sluice::exchange& ex);

/// The downstream response for an upstream result: the upstream's response (end-to-end
/// headers; `method` is the downstream request's, for HEAD: sluice::copy_response), or 504
/// for a timeout, 503 for an exhausted pool, 502 for any other failure.
sluice::response downstream_response(sluice::result<sluice::client_response> r, std::string_view method = {});

struct route {
    std::string method;
    std::string path;
    sluice::handler h;
};

/// `work,upload` -> {"work", "upload"}: the endpoint names of --limit-routes. Throws
/// std::invalid_argument on an empty list, an empty item or a name that is not an endpoint.
std::vector<std::string> parse_endpoints(std::string_view list);

/// GET /api/{style}/work, GET /api/{style}/files, POST /api/{style}/upload and
/// GET /api/{style}/bytes for the four styles (styles.cc), the limited endpoints behind the
/// limiter if any.
std::vector<route> routes(gateway& g);

/// Adds routes(g) to srv.
void add_routes(sluice::server& srv, gateway& g);

} // namespace gateway
