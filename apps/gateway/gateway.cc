#include "gateway.h"

#include <sluice/forwarding.h>

namespace gateway {

sluice::client_request upstream_request(const sluice::exchange& ex, std::string_view upstream_path) {
    const sluice::request& req = ex.request();
    sluice::client_request up;
    up.method = std::string(req.method());
    up.target = std::string(upstream_path);
    if (!req.query().empty()) {
        up.target += '?';
        up.target += req.query();
    }
    up.headers = sluice::forwardable_headers(req);
    sluice::append_forwarded_for(up.headers, req.remote_address());
    // Borrowed: the exchange (and its body) outlives the call, or the call is cancelled when
    // the exchange ends (each style arranges that).
    up.body_view = req.body();
    return up;
}

bool refused(sluice::exchange& ex) {
    if (auto why = sluice::forwarding_refusal(ex.request())) {
        ex.response().status(400).text("Bad Request: " + std::string(*why) + "\n");
        return true;
    }
    return false;
}

sluice::response downstream_response(const sluice::result<sluice::client_response>& r) {
    sluice::response out;
    if (r) {
        sluice::copy_response(*r, out);
        return out;
    }
    const std::error_code ec = r.error();
    if (ec == sluice::client_errc::response_timed_out || ec == sluice::client_errc::connect_timed_out ||
        ec == sluice::client_errc::acquire_timed_out) {
        out.status(504).text("Gateway Timeout: " + ec.message() + "\n");
    } else if (ec == sluice::client_errc::pool_exhausted) {
        // Our own pool is full, not the upstream broken: come back later (RFC 9110 §15.6.4).
        out.status(503).header("Retry-After", "1").text("Service Unavailable: " + ec.message() + "\n");
    } else {
        out.status(502).text("Bad Gateway: " + ec.message() + "\n");
    }
    return out;
}

} // namespace gateway
