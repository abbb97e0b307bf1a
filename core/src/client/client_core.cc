// Where client calls run: the caller's reactor loop, or the client's own one.
#include "client/client_core.h"

#include <algorithm>

#include "client/client_connection.h"
#include "tls/client_tls_context.h"
#include "tls/tls_driver.h"

namespace sluice::detail {

namespace {

std::shared_ptr<log_gate> make_gate(const client_options& o) {
    return o.log ? std::make_shared<log_gate>(o.log) : nullptr;
}

logger client_logger(const std::shared_ptr<log_gate>& gate) {
    if (!gate) {
        return logger(log_level::warn);
    }
    return logger(log_level::warn, [gate](log_level l, std::string_view m) { gate->write(l, m); });
}

std::shared_ptr<client_tls_context> make_tls(const client_options& o, const upstream& u, const logger& log) {
    const auto& hosts = u.state()->hosts();
    if (std::none_of(hosts.begin(), hosts.end(), [](const auto& h) { return h.tls; })) {
        return nullptr; // a plaintext upstream never loads a CA file
    }
    return std::make_shared<client_tls_context>(o.tls, *u.state(), log);
}

} // namespace

void log_gate::write(log_level l, std::string_view message) const {
    std::shared_lock lock(mu_);
    if (sink_) {
        sink_(l, message);
    }
}

void log_gate::close() noexcept {
    logger::sink dropped;
    {
        std::unique_lock lock(mu_);
        dropped.swap(sink_);
    }
    // `dropped` is destroyed here, outside the lock: its captures may take locks of their own.
}

client_core::client_core(upstream u, client_options o)
    : options(std::move(o)), target(std::move(u)), gate_(make_gate(options)), log_(client_logger(gate_)),
      tls_(make_tls(options, target, log_)), refresher_(target.state(), log_) {}

client_core::~client_core() {
    shutdown();
}

std::shared_ptr<client_pool> client_core::pool_for(const std::shared_ptr<loop_port>& port) {
    std::lock_guard lock(mu_);
    for (auto& [p, pool] : pools_) {
        if (p == port) {
            return pool;
        }
    }
    // Pools of loops that ended are dropped here, so a client that outlives servers does
    // not keep their ports.
    pools_.erase(
        std::remove_if(pools_.begin(), pools_.end(), [](const auto& e) { return e.second->stopped(); }),
        pools_.end());
    // The pool's copy of the options without the user's log sink: a pool may outlive ~client
    // (its loop frees it), and what the sink captures must not (the pool never logs).
    client_options pool_options = options;
    pool_options.log = nullptr;
    auto pool = std::make_shared<client_pool>(
        port->owner_loop(), pool_config{std::move(pool_options), target.state(), counters, tls_});
    pool->attach();
    if (shut_) {
        pool->shutdown();
    }
    pools_.emplace_back(port, pool);
    return pool;
}

bool client_core::start(const std::shared_ptr<loop_port>& port, std::shared_ptr<client_call_state> call) {
    call->port = port;
    // The first call starts the resolver thread: a client that is never used looks nothing up.
    refresher_.start();
    return port->post([self = shared_from_this(), port, call]() mutable {
        std::shared_ptr<client_pool> pool;
        try {
            pool = self->pool_for(port);
        } catch (...) {
            call->finished.store(true);
            call->deliver(result<client_response>(client_errc::cancelled));
            return;
        }
        pool->submit(std::move(call));
    });
}

std::shared_ptr<loop_port> client_core::own_port() {
    std::unique_lock lock(mu_);
    if (own_port_ || own_failed_ || shut_) {
        return own_port_;
    }
    std::promise<std::shared_ptr<loop_port>> ready;
    auto fut = ready.get_future();
    own_thread_ = std::thread([this, &ready] { run_own_loop(ready); });
    own_port_ = fut.get();
    own_failed_ = own_port_ == nullptr;
    if (own_failed_) {
        lock.unlock();
        own_thread_.join();
    }
    return own_port_;
}

void client_core::run_own_loop(std::promise<std::shared_ptr<loop_port>>& ready) noexcept {
    // The first reactor backend that runs here (the "auto" order: uring, then epoll). The
    // driver is built on this thread: an io_uring may be bound to the thread that made it.
    std::unique_ptr<io::driver> driver;
    io::driver_options opts;
    opts.recv_buffer_count = 64;
    opts.log = &log_;
    for (const io::backend* b : io::registered_backends()) {
        if (b->traits.connection_per_thread || !b->probe(opts).empty()) {
            continue;
        }
        std::string error;
        driver = b->create(opts, error);
        if (driver) {
            break;
        }
    }
    if (!driver) {
        log_.error("client: no reactor backend can run its loop");
        ready.set_value(nullptr);
        return;
    }
    try {
        // The TLS decorator, for https upstreams (the client is used outside a server too).
        auto wrapped = std::make_unique<tls_driver>(std::move(driver), nullptr);
        tls_driver* tls = wrapped.get();
        detail::loop l(std::move(wrapped), log_, 0);
        l.set_tls(tls);
        ready.set_value(l.executor_port());
        l.run(loop::run_mode::until_stopped);
    } catch (...) {
        log_.error("client: its own loop failed");
    }
}

void client_core::shutdown() noexcept {
    std::vector<std::pair<std::shared_ptr<loop_port>, std::shared_ptr<client_pool>>> pools;
    std::shared_ptr<loop_port> own;
    {
        std::lock_guard lock(mu_);
        if (shut_) {
            return;
        }
        shut_ = true;
        pools.swap(pools_);
        own = own_port_;
    }
    for (auto& [port, pool] : pools) {
        // On its own loop; a loop that has stopped shut its pool down already (on_drained).
        (void)port->post([pool = pool] { pool->shutdown(); });
    }
    if (own) {
        (void)own->post([own] { own->owner_loop().stop(); });
    }
    if (own_thread_.joinable()) {
        own_thread_.join();
    }
    // Last, on the destroying thread (never a loop: ~client's contract); ~client_core may run
    // on a loop, but finds it stopped already.
    refresher_.stop();
    // The pools' shutdowns were only posted: a server loop may still fail a TLS handshake (and
    // log why) before it runs them. From here no line reaches the user's sink.
    if (gate_) {
        gate_->close();
    }
}

} // namespace sluice::detail
