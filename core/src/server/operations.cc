#include "server/operations.h"

#include "access_log/access_log.h"
#include "limiter/limiter_core.h"
#include "loop/loop.h"
#include "server/admin.h"
#include "server/runtime.h"

namespace sluice::detail {

server_operations::server_operations() = default;
server_operations::~server_operations() {
    stop();
}

void server_operations::watch(std::string_view name, const limiter& lim) {
    limiters_.push_back({std::string(name), lim.core()});
}

void server_operations::watch(std::string_view name, std::function<client_stats()> stats) {
    if (!stats) {
        throw std::invalid_argument("server::watch: empty stats function for '" + std::string(name) + "'");
    }
    clients_.push_back({std::string(name), std::move(stats)});
}

void server_operations::start(const config& cfg, const router& routes, std::size_t loops, const logger& log,
                              std::vector<int> admin_fds) {
    for (std::size_t i = 0; i < routes.size(); ++i) {
        routes_.emplace_back(routes.pattern(i));
    }
    if (!cfg.access_log.path.empty()) {
        access_ = std::make_unique<access_log>(cfg.access_log, loops, log);
    }
    if (!cfg.admin.listen.empty()) {
        admin_ = std::make_unique<admin_endpoint>(
            cfg, log,
            admin_endpoint::sources{[this] { return render_metrics(snapshot()); },
                                    [this] { return not_ready(); }});
        try {
            admin_->start(std::exchange(admin_fds, {}));
        } catch (...) {
            admin_.reset();
            access_.reset();
            throw;
        }
    }
}

void server_operations::serving(const runtime* rt) noexcept {
    runtime_.store(rt, std::memory_order_release);
    phase_.store(phase::serving, std::memory_order_release);
}

void server_operations::stop() noexcept {
    phase_.store(phase::draining, std::memory_order_release);
    if (admin_) {
        admin_->stop();
    }
    access_.reset();
}

void server_operations::stop_admin_after_handover() noexcept {
    if (admin_) {
        admin_->stop_after_handover();
    }
}

std::vector<int> server_operations::admin_listening_fds() const {
    return admin_ ? admin_->listening_fds() : std::vector<int>{};
}

void server_operations::reopen_logs() noexcept {
    if (access_) {
        access_->reopen();
    }
}

std::uint16_t server_operations::admin_port() const noexcept {
    return admin_ ? admin_->port() : 0;
}

std::string server_operations::not_ready() const {
    switch (phase_.load(std::memory_order_acquire)) {
    case phase::starting:
        return "starting";
    case phase::draining:
        return "draining";
    case phase::serving:
        break;
    }
    for (const auto& l : limiters_) {
        const limiter_stats st = l.core->stats();
        const limiter_options& o = l.core->options();
        // Saturated: a new request would be turned away at once (every permit in use and the
        // queue full), so a balancer should prefer another instance until a permit frees.
        if (st.in_use >= o.permits && st.queued >= o.max_queue) {
            return "limiter '" + l.name + "' saturated";
        }
    }
    return {};
}

metrics_snapshot server_operations::snapshot() const {
    metrics_snapshot s;
    s.routes = routes_;
    s.requests.resize(routes_.size() + 1);
    if (phase_.load(std::memory_order_acquire) != phase::starting) {
        if (const runtime* rt = runtime_.load(std::memory_order_acquire)) {
            s.server = rt->stats();
            rt->collect(s.requests);
            const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
            for (const loop* l : rt->watched_loops()) {
                const std::int64_t since = l->busy_since_ns();
                if (since != 0 && now > since) {
                    s.loop_busy_seconds =
                        std::max(s.loop_busy_seconds, static_cast<double>(now - since) / 1e9);
                }
            }
        }
    }
    for (const auto& l : limiters_) {
        s.limiters.push_back({l.name, l.core->stats(), l.core->options().permits});
    }
    for (const auto& c : clients_) {
        s.clients.push_back({c.name, c.stats()});
    }
    s.watchdog_events = watchdog_events_.load(std::memory_order_relaxed);
    if (access_) {
        s.access_log_on = true;
        s.access_log = access_->figures();
    }
    s.ready = not_ready().empty();
    s.process = read_process_figures();
    return s;
}

} // namespace sluice::detail
