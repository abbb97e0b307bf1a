#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <stdexcept>

#include <sluice/server.h>

#include "server/backend_selection.h"
#include "server/runtime.h"
#include "server/server_context.h"
#include "server/server_thread.h"
#include "server/socket_util.h"
#include "server/watchdog.h"
#include "server/worker_pool.h"
#include "tls/tls_context.h"

namespace sluice::detail {

class server_impl {
public:
    server_impl(config cfg, sluice::logger log) : cfg_(std::move(cfg)), log_(std::move(log)) {}

    ~server_impl() { stop(); }

    void route(std::string_view method, std::string_view pattern, handler h) {
        std::lock_guard lock(mu_);
        if (started_) {
            throw std::logic_error("server::route: routes are fixed once the server has started");
        }
        routes_.add(method, pattern, std::move(h));
    }

    void start() {
        std::lock_guard lock(mu_);
        if (started_) {
            throw std::logic_error("server::start: already started");
        }
        validate_config(cfg_); // a config built in code gets the same checks as a parsed one
        // Certificate and key are loaded before anything binds: a bad file is a startup error
        // naming it, and a TLS listener never serves plaintext.
        std::unique_ptr<tls_context> tls;
        if (!cfg_.tls.cert.empty()) {
            tls = std::make_unique<tls_context>(cfg_.tls);
        }
        const socket_address addr = resolve_listen_address(cfg_.listen);
        ctx_ = std::make_unique<server_context>(cfg_, routes_, log_);
        tls_ = std::move(tls);
        ctx_->tls = tls_.get();
        backend_ = &select_backend(cfg_.backend, driver_options_for(*ctx_, 0), log_);
        if (cfg_.dispatch == dispatch_mode::pool) {
            workers_ = std::make_unique<worker_pool>(cfg_.worker_threads, ctx_.get());
            ctx_->workers = workers_.get();
        }
        runtime_ = backend_->traits.connection_per_thread ? make_thread_runtime(*backend_, *ctx_)
                                                          : make_reactor_runtime(*backend_, *ctx_);
        try {
            runtime_->start(addr);
        } catch (...) {
            runtime_.reset();
            workers_.reset();
            throw;
        }
        if (cfg_.watchdog_ms > 0 && cfg_.dispatch == dispatch_mode::inline_io) {
            auto loops = runtime_->watched_loops();
            if (!loops.empty()) {
                watchdog_ = std::make_unique<watchdog>(std::move(loops), cfg_.watchdog_ms, log_);
            }
        }
        started_ = true;
        running_ = true;
        if (backend_->traits.connection_per_thread) {
            log_.info(
                "listening on {} (port {}): backend {}, {} connection threads, accept queue {}, dispatch {}",
                cfg_.listen, runtime_->port(), backend_->name, cfg_.blocking.threads,
                cfg_.blocking.accept_queue, dispatch_name());
        } else {
            log_.info("listening on {} (port {}): backend {}, {} I/O thread{}, dispatch {}", cfg_.listen,
                      runtime_->port(), backend_->name, cfg_.io_threads, cfg_.io_threads == 1 ? "" : "s",
                      dispatch_name());
        }
    }

    void stop() noexcept {
        std::unique_lock lock(mu_);
        if (!running_) {
            return;
        }
        if (stopping_) {
            // A stop is in progress. From one of the server's own threads (a handler, a
            // listener, a loop task, a pool worker) waiting would deadlock: the stop cannot
            // finish before this very thread returns to its loop. Return at once; the stop in
            // progress completes without us. Any other thread waits for the end.
            if (!in_server_thread()) {
                cv_.wait(lock, [this] { return !running_; });
            }
            return;
        }
        stopping_ = true;
        lock.unlock();
        watchdog_.reset();
        runtime_->stop();
        // A stop() from a handler runs on a loop thread, which cannot join itself: hand the
        // joining to a thread of its own.
        if (in_server_thread()) {
            std::thread([this] { finish_stop(); }).detach();
            return;
        }
        finish_stop();
    }

    void wait() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !running_; });
    }

    std::uint16_t port() const noexcept { return runtime_ ? runtime_->port() : 0; }
    std::string_view backend_name() const noexcept { return backend_ ? backend_->name : std::string_view(); }
    const config& settings() const noexcept { return cfg_; }
    const sluice::logger& log() const noexcept { return log_; }
    server_stats stats() const noexcept { return runtime_ ? runtime_->stats() : server_stats{}; }

private:
    void finish_stop() noexcept {
        runtime_->join();
        if (workers_) {
            workers_->stop();
        }
        std::lock_guard lock(mu_);
        running_ = false;
        cv_.notify_all();
    }

    // Marks, not thread handles: another stop may be joining those (server_thread.h).
    bool in_server_thread() const noexcept { return ctx_ != nullptr && current_server() == ctx_.get(); }

    std::string_view dispatch_name() const noexcept {
        return cfg_.dispatch == dispatch_mode::pool ? "pool" : "inline";
    }

    config cfg_;
    sluice::logger log_;
    router routes_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::unique_ptr<server_context> ctx_;
    std::unique_ptr<tls_context> tls_; // outlives the runtime, whose loops' TLS drivers use it
    const io::backend* backend_ = nullptr;
    std::unique_ptr<worker_pool> workers_;
    std::unique_ptr<runtime> runtime_;
    std::unique_ptr<watchdog> watchdog_;
    bool started_ = false;
    bool running_ = false;
    bool stopping_ = false;
};

} // namespace sluice::detail

namespace sluice {

server::server(config cfg) {
    const log_level level = cfg.log;
    impl_ = std::make_unique<detail::server_impl>(std::move(cfg), sluice::logger(level));
}

server::server(config cfg, sluice::logger log)
    : impl_(std::make_unique<detail::server_impl>(std::move(cfg), std::move(log))) {}

server::~server() = default;

server& server::route(std::string_view method, std::string_view pattern, handler h) {
    impl_->route(method, pattern, std::move(h));
    return *this;
}

void server::start() {
    impl_->start();
}
void server::stop() noexcept {
    impl_->stop();
}
void server::wait() {
    impl_->wait();
}

void server::run_until_signal() {
    // Block the signals in every thread the server starts (they inherit the mask), and wait
    // for them on this one: no async-signal-safety puzzles.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    start();
    int sig = 0;
    sigwait(&set, &sig);
    impl_->log().info("signal {}: stopping", sig);
    stop();
}

std::uint16_t server::port() const noexcept {
    return impl_->port();
}
std::string_view server::backend_name() const noexcept {
    return impl_->backend_name();
}
const config& server::settings() const noexcept {
    return impl_->settings();
}
const sluice::logger& server::logger() const noexcept {
    return impl_->log();
}
server_stats server::stats() const noexcept {
    return impl_->stats();
}

} // namespace sluice
