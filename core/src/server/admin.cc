#include "server/admin.h"

#include <sluice/server.h>

#include "server/server_access.h"

namespace sluice::detail {

namespace {

config admin_config_of(const config& main) {
    config c;
    c.listen = main.admin.listen;
    c.backend = main.backend;
    c.log = main.log;
    c.io_threads = 1;
    // Scrapes are short; a probe that waits behind one is still answered within the loop.
    c.watchdog_ms = 0;
    c.shutdown_timeout_ms = 1000;
    c.blocking.threads = 4;
    c.blocking.accept_queue = 16;
    c.limits.max_connections = 64;
    c.limits.max_body_bytes = 0;
    return c;
}

// The admin server logs through the main logger, marked as its own; its "listening on ...
// (port N)" line is replaced by start()'s, so that tools reading the public port from the log
// (tests/support/app_process, scripts) never pick the admin port.
logger admin_logger(const config& main, const logger& log) {
    return logger(main.log, [&log](log_level l, std::string_view text) {
        if (!text.starts_with("listening on ")) {
            log.log(l, "admin: {}", text);
        }
    });
}

} // namespace

admin_endpoint::admin_endpoint(const config& main, const logger& log, sources src)
    : log_(log), listen_(main.admin.listen),
      srv_(std::make_unique<sluice::server>(admin_config_of(main), admin_logger(main, log))),
      src_(std::move(src)) {
    srv_->get("/metrics", [this](exchange& ex) {
        // Version 0.0.4 of the text format: what every Prometheus server asks for by default.
        ex.response().body() = src_.metrics();
        ex.response().content_type("text/plain; version=0.0.4; charset=utf-8");
    });
    srv_->get("/healthz", [](exchange& ex) { ex.response().text("ok\n"); });
    srv_->get("/readyz", [this](exchange& ex) {
        const std::string why = src_.not_ready();
        if (why.empty()) {
            ex.response().text("ready\n");
        } else {
            // 503: what Kubernetes and haproxy's httpchk take as "send no traffic here".
            ex.response().status(503).text("not ready: " + why + "\n");
        }
    });
}

admin_endpoint::~admin_endpoint() = default;

void admin_endpoint::start(std::vector<int> inherited) {
    if (!inherited.empty()) {
        server_access::adopt(*srv_, std::move(inherited));
    }
    try {
        srv_->start();
    } catch (const startup_error& e) {
        // The admin server's own key ("listen") is this one's: said once, as admin.listen.
        std::string_view what = e.what();
        if (!e.key().empty() && what.starts_with(e.key() + ": ")) {
            what.remove_prefix(e.key().size() + 2);
        }
        throw startup_error("admin.listen", std::string(what));
    }
    log_.info("admin listener on {} (admin port {}): /metrics /healthz /readyz", listen_, srv_->port());
}

void admin_endpoint::stop() noexcept {
    srv_->stop();
}

void admin_endpoint::stop_after_handover() noexcept {
    server_access::stop_after_handover(*srv_);
}

std::vector<int> admin_endpoint::listening_fds() const {
    return server_access::listening_fds(*srv_);
}

std::uint16_t admin_endpoint::port() const noexcept {
    return srv_->port();
}

} // namespace sluice::detail
