#include "gateway.h"

#include <chrono>
#include <utility>

#include <sluice/forwarding.h>

namespace gateway {

sluice::client_request upstream_request(sluice::exchange& ex, std::string_view upstream_path,
                                        body_hold hold) {
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
    // A borrowed body is sent from the exchange's memory by the upstream connection. A client
    // that leaves ends the exchange, and its request slot (body included) goes back to the
    // loop's pool and may be refilled, while client_call::cancel() is only posted to the loop
    // and a send already submitted (io_uring) may still read the bytes until its completion,
    // after the close. So only the sync style, whose handler holds the exchange until the call
    // has ended, borrows; the others move the body into the call (no copy either): the call
    // owns it, and the connection keeps the call until its send has completed or its fd is
    // closed (client_connection::sending_call_), whatever becomes of the exchange.
    if (hold == body_hold::borrow) {
        up.body_view = req.body();
    } else {
        up.body = ex.take_body();
    }
    return up;
}

sluice::async_context suspend_for_upstream(sluice::exchange& ex) {
    return ex.start_async(std::chrono::milliseconds(0));
}

bool refused(sluice::exchange& ex) {
    if (auto why = sluice::forwarding_refusal(ex.request())) {
        ex.response().status(400).text("Bad Request: " + std::string(*why) + "\n");
        return true;
    }
    return false;
}

sluice::response downstream_response(sluice::result<sluice::client_response> r, std::string_view method) {
    sluice::response out;
    if (r) {
        sluice::copy_response(std::move(*r), out, method); // the body moves, not copied
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
