#include "server/loop_thread.h"

#include "server/runtime.h"
#include "tls/tls_driver.h"

namespace sluice::detail {

std::string loop_thread::open(const io::backend& b, server_context& server, unsigned index, std::mutex& mu) {
    std::string error;
    auto driver = b.create(driver_options_for(server, index), error);
    if (driver == nullptr) {
        return error.empty() ? std::string(b.name) + ": cannot create a driver" : error;
    }
    // TLS sits at the seam, as a driver wrapping the backend's (tls/tls_driver.h): the loop,
    // its connections and the backend stay as they are. Every reactor loop has it, whatever
    // the listener speaks: a handler may call an https upstream (sluice::client) on its loop
    // at any time. The plaintext cost is one table look-up per verb and one bit test per
    // completion (docs/tls.md, "Client"). A blocking backend's loops run no client calls.
    tls_driver* tls = nullptr;
    if (server.tls != nullptr || !b.traits.connection_per_thread) {
        auto wrapped = std::make_unique<tls_driver>(std::move(driver), server.tls);
        tls = wrapped.get();
        driver = std::move(wrapped);
    }
    std::lock_guard lock(mu);
    loop = std::make_unique<detail::loop>(std::move(driver), server.log, index);
    loop->set_tls(tls);
    ctx = std::make_unique<loop_context>(*loop, server);
    // Connections of a TLS listener only are adopted (adopt_connection): with tls.listen, the
    // plaintext listener's share this loop and pass through the driver untouched.
    ctx->tls = server.tls != nullptr ? tls : nullptr;
    return "";
}

void add_stats(const std::vector<loop_thread>& loops, server_stats& st) noexcept {
    for (const auto& l : loops) {
        if (l.ctx != nullptr) {
            l.ctx->counters.add_to(st);
        }
    }
}

void add_request_totals(const std::vector<loop_thread>& loops, request_totals& totals) noexcept {
    for (const auto& l : loops) {
        if (l.ctx != nullptr && l.ctx->metrics != nullptr) {
            l.ctx->metrics->add_to(totals);
        }
    }
}

} // namespace sluice::detail
