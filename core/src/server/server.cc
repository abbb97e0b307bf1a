#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include <sluice/server.h>

#include "server/backend_selection.h"
#include "server/handover_endpoint.h"
#include "server/inherited_listeners.h"
#include "server/operations.h"
#include "server/runtime.h"
#include "server/server_access.h"
#include "server/server_context.h"
#include "server/server_thread.h"
#include "server/socket_util.h"
#include "server/watchdog.h"
#include "server/worker_pool.h"
#include "tls/ktls_probe.h"
#include "tls/tls_context.h"

namespace sluice::detail {

class server_impl {
public:
    server_impl(config cfg, sluice::logger log) : cfg_(std::move(cfg)), log_(std::move(log)) {}

    ~server_impl() {
        stop();
        for (int fd : adopted_) {
            ::close(fd); // adopted, but start() never ran or failed before taking them
        }
    }

    void route(std::string_view method, std::string_view pattern, handler h) {
        std::lock_guard lock(mu_);
        if (started_) {
            throw std::logic_error("server::route: routes are fixed once the server has started");
        }
        routes_.add(method, pattern, std::move(h));
    }

    template <typename... Args>
    void watch(Args&&... args) {
        std::lock_guard lock(mu_);
        if (started_) {
            throw std::logic_error(
                "server::watch: watched limiters and clients are fixed once the server has started");
        }
        ops_.watch(std::forward<Args>(args)...);
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
            if (cfg_.tls.ktls) {
                // Opt-in and probed, never assumed: the fallback is userspace TLS, which is what
                // runs whenever any part is missing (tls/ktls_probe.h says which).
                log_.info("{}", probe_ktls().describe());
            }
        }
        const socket_address addr = resolve_listen_address(cfg_.listen);
        std::optional<socket_address> tls_addr;
        if (!cfg_.tls.listen.empty()) {
            tls_addr = resolve_endpoint(cfg_.tls.listen, "tls.listen");
        }
        inherited taken;
        take_listeners(addr, tls_addr ? &*tls_addr : nullptr, taken);
        ctx_ = std::make_unique<server_context>(cfg_, routes_, log_);
        tls_ = std::move(tls);
        ctx_->tls = tls_.get();
        backend_ = &select_backend(cfg_.backend, driver_options_for(*ctx_, 0), log_);
        // Loop indexes: 0..io_threads-1 (reactor), or the acceptor 0 and the connection
        // threads 1..blocking.threads (thread runtime); each logs into a queue of its own.
        const std::size_t loops = backend_->traits.connection_per_thread
                                      ? std::size_t{cfg_.blocking.threads} + 1
                                      : std::size_t{cfg_.io_threads};
        ops_.start(cfg_, routes_, loops, log_, std::exchange(taken.admin, {}));
        ctx_->collect_metrics = !cfg_.admin.listen.empty();
        ctx_->access = ops_.log_sink();
        try {
            // In the try: a pool whose threads cannot all start (worker_threads) stops the
            // operations threads too.
            if (cfg_.dispatch == dispatch_mode::pool) {
                workers_ = std::make_unique<worker_pool>(cfg_.worker_threads, ctx_.get());
                ctx_->workers = workers_.get();
            }
            runtime_ = backend_->traits.connection_per_thread ? make_thread_runtime(*backend_, *ctx_)
                                                              : make_reactor_runtime(*backend_, *ctx_);
            // A first start claims the hand-over path before it serves, so that a path it cannot
            // use is a startup error; a takeover claims it only once serving (below), so that a
            // failed start leaves the path to the old server, which still serves.
            if (!cfg_.handover_socket.empty() && !taken.from) {
                start_handover_endpoint();
            }
            runtime_->start(listen_plan_of(addr, tls_addr ? &*tls_addr : nullptr, taken));
        } catch (...) {
            handover_.reset();
            ops_.stop();
            runtime_.reset();
            ctx_->workers = nullptr;
            workers_.reset();
            throw;
        }
        if (cfg_.watchdog_ms > 0 && cfg_.dispatch == dispatch_mode::inline_io) {
            auto watched = runtime_->watched_loops();
            if (!watched.empty()) {
                watchdog_ = std::make_unique<watchdog>(std::move(watched), cfg_.watchdog_ms, log_,
                                                       ops_.watchdog_events());
            }
        }
        ops_.serving(runtime_.get());
        serving_.store(true, std::memory_order_release);
        started_ = true;
        running_ = true;
        if (taken.from) {
            // The old server stops accepting and drains: its listening sockets live on here.
            taken.from->acknowledge(log_);
            taken.from.reset();
            try {
                start_handover_endpoint();
            } catch (const startup_error& e) {
                // Serving matters more than the next restart: say why that one will bind.
                log_.error("{}: the next restart cannot take over and will have to bind", e.what());
                handover_.reset();
            }
        }
        if (backend_->traits.connection_per_thread) {
            log_.info(
                "listening on {} (port {}): backend {}, {} connection threads, accept queue {}, dispatch {}",
                cfg_.listen, runtime_->port(0), backend_->name, cfg_.blocking.threads,
                cfg_.blocking.accept_queue, dispatch_name());
        } else {
            log_.info("listening on {} (port {}): backend {}, {} I/O thread{}, dispatch {}", cfg_.listen,
                      runtime_->port(0), backend_->name, cfg_.io_threads, cfg_.io_threads == 1 ? "" : "s",
                      dispatch_name());
        }
        if (tls_addr) {
            // A line of its own, and not "(port N)": tools read the public port from the line above.
            log_.info("TLS listener on {} (TLS port {}); {} stays plaintext", cfg_.tls.listen,
                      runtime_->port(1), cfg_.listen);
        }
    }

    void stop() noexcept {
        std::unique_lock lock(mu_);
        if (!running_) {
            return;
        }
        if (stopping_) {
            // A stop is in progress; a second one (a second SIGTERM, Ctrl-C twice) means now:
            // it ends the shutdown delay. From one of the server's own threads (a handler, a
            // listener, a loop task, a pool worker) waiting would deadlock: the stop cannot
            // finish before this very thread returns to its loop. Return at once; the stop in
            // progress completes without us. Any other thread waits for the end.
            cut_delay_ = true;
            cv_.notify_all();
            if (!in_server_thread()) {
                cv_.wait(lock, [this] { return !running_; });
            }
            return;
        }
        stopping_ = true;
        lock.unlock();
        // No hand-over may send listening sockets that are about to close.
        if (handover_) {
            handover_->stop();
        }
        if (cfg_.shutdown_delay_ms > 0) {
            announce_stop();
            if (in_server_thread()) {
                // The delay must not hold a loop: wait, drain and join on a thread of its own.
                std::thread([this] {
                    wait_shutdown_delay();
                    begin_drain();
                    finish_stop();
                }).detach();
                return;
            }
            wait_shutdown_delay();
        }
        begin_drain();
        // A stop() from a handler runs on a loop thread, which cannot join itself: hand the
        // joining to a thread of its own.
        if (in_server_thread()) {
            std::thread([this] { finish_stop(); }).detach();
            return;
        }
        finish_stop();
    }

    bool running() {
        std::lock_guard lock(mu_);
        return running_;
    }

    void wait() {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return !running_; });
    }

    std::uint16_t port() const noexcept { return runtime_ ? runtime_->port(0) : 0; }
    std::uint16_t tls_port() const noexcept {
        return runtime_ && !cfg_.tls.listen.empty() ? runtime_->port(1) : 0;
    }
    std::string_view backend_name() const noexcept { return backend_ ? backend_->name : std::string_view(); }
    const config& settings() const noexcept { return cfg_; }
    const sluice::logger& log() const noexcept { return log_; }
    server_stats stats() const noexcept { return runtime_ ? runtime_->stats() : server_stats{}; }
    void reopen_logs() noexcept { ops_.reopen_logs(); }

    bool reload_tls() noexcept {
        tls_context* tls = nullptr;
        {
            std::lock_guard lock(mu_);
            tls = started_ ? tls_.get() : nullptr; // tls_ lives as long as this object
        }
        if (tls == nullptr) {
            log_.warn("TLS reload asked for, but this server does not speak TLS");
            return false;
        }
        try {
            tls->reload();
        } catch (const std::exception& e) {
            // Never fatal: a certificate renewal that left a bad file must not take the
            // service down; the current certificates keep serving until the next reload.
            log_.error("TLS reload failed, keeping the current certificates: {}", e.what());
            return false;
        }
        log_.info("TLS certificates reloaded: new handshakes use them");
        return true;
    }
    bool ready() const { return ops_.not_ready().empty(); }
    std::uint16_t admin_port() const noexcept { return ops_.admin_port(); }

    void adopt(std::vector<int> fds) {
        std::lock_guard lock(mu_);
        adopted_ = std::move(fds);
    }
    std::vector<listening_socket> listening_sockets() const {
        return serving_.load(std::memory_order_acquire) ? runtime_->listening_sockets()
                                                        : std::vector<listening_socket>{};
    }
    // For the admin server's hand-over (server_access): it has `listen` only, plaintext.
    std::vector<int> listening_fds() const {
        std::vector<int> out;
        for (const listening_socket& s : listening_sockets()) {
            out.push_back(s.fd);
        }
        return out;
    }
    void set_stop_waker(std::function<void()> w) {
        std::lock_guard lock(mu_);
        wake_on_handover_ = std::move(w);
    }

    /// After a hand-over (on the hand-over endpoint's thread): the listeners serve in the new
    /// process; stop as stop() does, without waiting here, and keep idle keep-alive
    /// connections for one more response (server_context::drain_idle_after_response).
    void stop_after_handover() noexcept {
        std::function<void()> wake;
        {
            std::lock_guard lock(mu_);
            if (!running_ || stopping_) {
                return;
            }
            stopping_ = true;
            wake = wake_on_handover_;
        }
        ctx_->drain_idle_after_response.store(true, std::memory_order_relaxed);
        // Probes must reach the new process only: a balancer that saw this one's "draining"
        // now and then would take the address out.
        ops_.stop_admin_after_handover();
        begin_drain();
        try {
            std::thread([this] { finish_stop(); }).detach();
        } catch (const std::system_error&) {
            finish_stop(); // the endpoint detaches its own thread when stopped from it
        }
        if (wake) {
            wake();
        }
    }

private:
    struct inherited {
        std::vector<int> main;
        std::vector<int> admin;
        std::vector<int> tls;
        std::optional<takeover> from; // acknowledged once serving
        inherited() = default;
        inherited(const inherited&) = delete;
        inherited& operator=(const inherited&) = delete;
        ~inherited() {
            for (int fd : main) {
                ::close(fd);
            }
            for (int fd : admin) {
                ::close(fd);
            }
            for (int fd : tls) {
                ::close(fd);
            }
        }
    };

    static socket_address resolve_endpoint(const std::string& text, const std::string& key) {
        try {
            return resolve_listen_address(text);
        } catch (const startup_error& e) {
            throw startup_error(key, e.reason());
        }
    }

    // `listen`, then tls.listen when set: what each speaks, and the sockets inherited for it.
    listen_plan listen_plan_of(const socket_address& addr, const socket_address* tls_addr, inherited& taken) {
        listen_plan plan;
        listen_endpoint main;
        main.addr = addr;
        // tls.cert alone: the one listener speaks TLS (and never plaintext, server_context::tls).
        main.kind = tls_ != nullptr && tls_addr == nullptr ? listener_kind::tls : listener_kind::plain;
        main.adopted = std::exchange(taken.main, {});
        plan.push_back(std::move(main));
        if (tls_addr != nullptr) {
            listen_endpoint tls;
            tls.addr = *tls_addr;
            tls.kind = listener_kind::tls;
            tls.role = listener_role::tls;
            tls.key = "tls.listen";
            tls.adopted = std::exchange(taken.tls, {});
            plan.push_back(std::move(tls));
        }
        return plan;
    }

    // The listening sockets this server does not bind: given by the core (the admin server of a
    // hand-over), inherited from systemd, or handed over by the server at handover_socket.
    void take_listeners(const socket_address& addr, const socket_address* tls_addr, inherited& out) {
        if (!adopted_.empty()) {
            out.main = std::exchange(adopted_, {}); // checked by the server that took them over
            return;
        }
        std::optional<socket_address> admin_addr;
        if (!cfg_.admin.listen.empty()) {
            try {
                admin_addr = resolve_listen_address(cfg_.admin.listen);
            } catch (const startup_error& e) {
                throw startup_error("admin.listen", e.reason());
            }
        }
        std::vector<handed_fd> fds = systemd_listeners(std::span<const char* const>(environ, environ_size()),
                                                       addr, admin_addr ? &*admin_addr : nullptr, tls_addr);
        std::string_view key = "LISTEN_FDS";
        if (fds.empty() && !cfg_.handover_socket.empty()) {
            key = "handover_socket";
            out.from = take_over(cfg_.handover_socket, log_);
            if (out.from) {
                fds = std::exchange(out.from->fds, {});
            }
        }
        out.main = fds_of(fds, listener_role::main);
        out.admin = fds_of(fds, listener_role::admin);
        out.tls = fds_of(fds, listener_role::tls);
        if (fds.empty()) {
            return;
        }
        if (tls_addr == nullptr && !out.tls.empty()) {
            // tls.listen was unset for this start: that listener ends with the old process.
            log_.info(
                "{}: a TLS listening socket (tls.listen) was passed, but tls.listen is unset: closing it",
                key);
            for (int fd : std::exchange(out.tls, {})) {
                ::close(fd);
            }
        }
        if (!admin_addr && !out.admin.empty()) {
            // admin.listen was unset for this start: that listener ends with the old process.
            log_.info("{}: an admin listening socket was passed, but admin.listen is unset: closing it", key);
            for (int fd : std::exchange(out.admin, {})) {
                ::close(fd);
            }
        }
        if (out.main.empty()) {
            throw startup_error(std::string(key),
                                "no listening socket for listen (" + cfg_.listen + ") was passed");
        }
        for (int fd : out.main) {
            if (std::string why = check_inherited(fd, addr); !why.empty()) {
                throw startup_error(std::string(key), why + " (listen = " + cfg_.listen + ")");
            }
        }
        for (int fd : out.admin) {
            if (std::string why = check_inherited(fd, *admin_addr); !why.empty()) {
                throw startup_error(std::string(key), why + " (admin.listen = " + cfg_.admin.listen + ")");
            }
        }
        // tls.listen set and no socket passed for it (an old server without it): bound afresh.
        for (int fd : out.tls) {
            if (std::string why = check_inherited(fd, *tls_addr); !why.empty()) {
                throw startup_error(std::string(key), why + " (tls.listen = " + cfg_.tls.listen + ")");
            }
        }
    }

    static std::size_t environ_size() noexcept {
        std::size_t n = 0;
        while (environ[n] != nullptr) {
            ++n;
        }
        return n;
    }

    void start_handover_endpoint() {
        handover_ = std::make_unique<handover_endpoint>(
            cfg_.handover_socket, log_,
            [this] {
                std::vector<handed_fd> out;
                for (const listening_socket& s : listening_sockets()) {
                    out.push_back({s.role, s.fd}); // the new process learns which listener each is
                }
                if (out.empty()) {
                    return out; // not serving (yet, or any more)
                }
                for (int fd : ops_.admin_listening_fds()) {
                    out.push_back({listener_role::admin, fd});
                }
                return out;
            },
            [this] { stop_after_handover(); });
        handover_->start();
    }

    // shutdown_delay_ms: readiness false while the listeners still accept, so that a balancer
    // probing /readyz takes this instance out before a connection to it can be refused; each
    // response meanwhile closes its connection, so the balancer's pooled ones end cleanly.
    void announce_stop() noexcept {
        ops_.draining();
        ctx_->closing_soon.store(true, std::memory_order_relaxed);
        log_.info("stopping: /readyz says draining; serving for {} ms more (shutdown_delay_ms), "
                  "a second signal stops at once",
                  cfg_.shutdown_delay_ms);
    }

    void wait_shutdown_delay() noexcept {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(cfg_.shutdown_delay_ms), [this] { return cut_delay_; });
    }

    // Readiness goes false before the listeners close, so a balancer that probes /readyz
    // stops sending new connections while the ones in progress drain.
    void begin_drain() noexcept {
        serving_.store(false, std::memory_order_release);
        ops_.draining();
        watchdog_.reset();
        runtime_->stop();
    }

    void finish_stop() noexcept {
        runtime_->join();
        if (handover_) {
            handover_->stop(); // after a hand-over: joins the endpoint's thread, which has returned
        }
        if (workers_) {
            workers_->stop();
        }
        ops_.stop(); // after the drain: /readyz said "draining" throughout, every line is logged
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
    server_operations ops_; // outlives the runtime: loops hold its access log queues
    std::unique_ptr<server_context> ctx_;
    std::unique_ptr<tls_context> tls_; // outlives the runtime, whose loops' TLS drivers use it
    const io::backend* backend_ = nullptr;
    std::unique_ptr<worker_pool> workers_;
    std::unique_ptr<runtime> runtime_;
    std::unique_ptr<watchdog> watchdog_;
    std::unique_ptr<handover_endpoint> handover_;
    std::vector<int> adopted_;
    std::function<void()> wake_on_handover_;
    std::atomic<bool> serving_{false};
    bool started_ = false;
    bool running_ = false;
    bool stopping_ = false;
    bool cut_delay_ = false; // a second stop() ends shutdown_delay_ms
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

namespace {

// SIGUSR1 and SIGHUP, whenever they come: false for any other signal.
bool serve_signal(server& srv, int sig) {
    if (sig == SIGUSR1) {
        // logrotate's postrotate: the file was moved; write to a new one at the path.
        srv.logger().info("signal {}: reopening the access log", sig);
        srv.reopen_logs();
        return true;
    }
    if (sig == SIGHUP) {
        // A renewed certificate (certbot's deploy hook: kill -HUP), as nginx reloads.
        srv.logger().info("signal {}: reloading the TLS certificates", sig);
        srv.reload_tls();
        return true;
    }
    return false;
}

} // namespace

void server::run_until_signal() {
    // Block the signals in every thread the server starts (they inherit the mask), and wait
    // for them on this one: no async-signal-safety puzzles.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    // A hand-over stops the server from the hand-over thread; this thread then waits for the
    // drain as after SIGTERM, so that the process exits 0 once it ends.
    // The SIGTERM's siginfo cannot tell it from a kill(1) (glibc's pthread_kill reaches here
    // with si_code SI_USER), so the waker says so itself.
    auto handed_over = std::make_shared<std::atomic<bool>>(false);
    impl_->set_stop_waker([self = pthread_self(), handed_over] {
        handed_over->store(true);
        pthread_kill(self, SIGTERM);
    });
    start();
    int sig = 0;
    for (;;) {
        siginfo_t info{};
        sig = sigwaitinfo(&set, &info);
        if (sig < 0) {
            continue; // EINTR
        }
        if (sig == SIGTERM && handed_over->load()) {
            impl_->log().info("handed over: waiting for the drain");
            stop();
            return;
        }
        if (!serve_signal(*this, sig)) {
            break;
        }
    }
    impl_->log().info("signal {}: stopping", sig);
    if (impl_->settings().shutdown_delay_ms == 0) {
        stop();
        return;
    }
    // The shutdown delay runs on a thread of its own, so that this one still hears signals: a
    // second SIGTERM or SIGINT ends the delay (and waits for the drain), SIGUSR1 and SIGHUP
    // work as before. The poll notices the end of the stop.
    std::thread stopper([this] { stop(); });
    const timespec poll{0, 100'000'000};
    while (impl_->running()) {
        siginfo_t info{};
        sig = sigtimedwait(&set, &info, &poll);
        if (sig == SIGINT || sig == SIGTERM) {
            impl_->log().info("signal {}: stopping now", sig);
            stop();
        } else if (sig > 0) {
            serve_signal(*this, sig);
        }
    }
    stopper.join();
}

server& server::watch(std::string_view name, const limiter& lim) {
    impl_->watch(name, lim);
    return *this;
}

server& server::watch(std::string_view name, std::function<client_stats()> stats) {
    impl_->watch(name, std::move(stats));
    return *this;
}

void server::reopen_logs() noexcept {
    impl_->reopen_logs();
}

bool server::reload_tls() noexcept {
    return impl_->reload_tls();
}

bool server::ready() const noexcept {
    try {
        return impl_->ready();
    } catch (...) {
        return false;
    }
}

void detail::server_access::adopt(server& s, std::vector<int> fds) {
    s.impl_->adopt(std::move(fds));
}

std::vector<int> detail::server_access::listening_fds(const server& s) {
    return s.impl_->listening_fds();
}

void detail::server_access::stop_after_handover(server& s) noexcept {
    s.impl_->stop_after_handover();
}

std::uint16_t server::admin_port() const noexcept {
    return impl_->admin_port();
}

std::uint16_t server::port() const noexcept {
    return impl_->port();
}
std::uint16_t server::tls_port() const noexcept {
    return impl_->tls_port();
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
