#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "loop/loop.h"
#include "server/connection.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/loop_thread.h"
#include "server/runtime.h"
#include "server/server_thread.h"
#include "server/thread_start.h"

namespace sluice::detail {

io::driver_options driver_options_for(const server_context& ctx, unsigned loop_index) {
    io::driver_options o;
    o.loop_index = loop_index;
    o.send_timeout_ms = ctx.cfg.limits.write_timeout_ms;
    o.max_fds = ctx.cfg.limits.max_connections + 64;
    o.log = &ctx.log;
    return o;
}

namespace {

class reactor_runtime final : public runtime {
public:
    reactor_runtime(const io::backend& b, server_context& ctx) : backend_(b), ctx_(ctx) {}

    ~reactor_runtime() override {
        stop();
        join();
        for (const listening_socket& s : pending_) {
            ::close(s.fd);
        }
    }

    void start(listen_plan plan) override {
        const unsigned n = ctx_.cfg.io_threads;
        std::vector<std::vector<listening_socket>> per_loop(n);
        try {
            for (std::size_t e = 0; e < plan.size() && e < max_listen_endpoints; ++e) {
                // Owned here until the loops take them: the destructor closes what a failed start left.
                const std::size_t first = pending_.size();
                for (int fd : std::exchange(plan[e].adopted, {})) {
                    pending_.push_back({fd, plan[e].kind, plan[e].role});
                }
                ports_[e] =
                    pending_.size() > first ? adopt(plan[e], first, per_loop) : bind(plan[e], per_loop);
            }
        } catch (...) {
            close_adopted(plan);
            throw;
        }
        {
            std::lock_guard lock(mu_);
            listening_ = pending_;
        }
        slots_.resize(n);
        std::vector<std::future<std::string>> ready;
        ready.reserve(n);
        for (unsigned i = 0; i < n; ++i) {
            std::promise<std::string> p;
            std::future<std::string> f = p.get_future();
            try {
                // The sockets are copied in, not moved: if the thread cannot start, per_loop
                // still says which sockets no loop owns.
                slots_[i].thread = start_thread(
                    &ctx_, [this, i, fds = per_loop[i], p = std::move(p)]() mutable { run_loop(i, fds, p); });
            } catch (const std::exception& e) {
                abandon_start(ready, per_loop, i);
                throw thread_start_failed("io_threads", i, n, e);
            }
            ready.push_back(std::move(f));
        }
        std::string error;
        for (auto& f : ready) {
            std::string e = f.get();
            if (!e.empty() && error.empty()) {
                error = std::move(e);
            }
        }
        pending_.clear(); // owned by the listeners now (or closed by failed threads)
        if (!error.empty()) {
            stop();
            join();
            throw startup_error("backend", error);
        }
    }

    std::vector<listening_socket> listening_sockets() const override {
        std::lock_guard lock(mu_);
        return listening_;
    }

    void stop() noexcept override {
        std::lock_guard lock(mu_);
        stopped_ = true;
        listening_.clear(); // the listeners close now
        for (auto& s : slots_) {
            if (s.loop != nullptr) {
                s.loop->stop();
            }
        }
    }

    void join() override {
        for (auto& s : slots_) {
            s.join();
        }
    }

    std::uint16_t port(std::size_t endpoint) const noexcept override {
        return endpoint < ports_.size() ? ports_[endpoint] : 0;
    }

    server_stats stats() const noexcept override {
        server_stats st;
        std::lock_guard lock(mu_);
        add_stats(slots_, st);
        return st;
    }

    void collect(request_totals& totals) const noexcept override {
        std::lock_guard lock(mu_);
        add_request_totals(slots_, totals);
    }

    std::vector<const loop*> watched_loops() const override {
        std::lock_guard lock(mu_);
        std::vector<const loop*> out;
        for (const auto& s : slots_) {
            if (s.loop != nullptr) {
                out.push_back(s.loop.get());
            }
        }
        return out;
    }

private:
    static std::uint16_t port_of(const socket_address& a) {
        if (a.storage.ss_family == AF_INET6) {
            return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
        }
        return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
    }

    static void set_port(socket_address& a, std::uint16_t port) {
        if (a.storage.ss_family == AF_INET6) {
            reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_port = htons(port);
        } else {
            reinterpret_cast<sockaddr_in*>(&a.storage)->sin_port = htons(port);
        }
    }

    // Every loop gets its own SO_REUSEPORT socket: the kernel spreads connections, and no
    // loop ever touches another's listener. Bound here, so that errors are startup errors.
    // Returns the bound port.
    std::uint16_t bind(const listen_endpoint& e, std::vector<std::vector<listening_socket>>& per_loop) {
        const auto n = static_cast<unsigned>(per_loop.size());
        // SO_REUSEPORT would also let us join a port that another process (of the same user)
        // holds with SO_REUSEPORT: a plain bind first makes "address in use" an error instead.
        if (n > 1 && port_of(e.addr) != 0) {
            ::close(open_endpoint_listener(e, e.addr, reuse_port::no, 1));
        }
        std::uint16_t port = 0;
        for (unsigned i = 0; i < n; ++i) {
            socket_address a = e.addr;
            if (i > 0) {
                set_port(a, port);
            }
            pending_.push_back({open_endpoint_listener(e, a, n > 1 ? reuse_port::yes : reuse_port::no, 4096),
                                e.kind, e.role});
            per_loop[i].push_back(pending_.back());
            if (i == 0) {
                port = bound_port(pending_.back().fd);
            }
        }
        return port;
    }

    // Inherited sockets: each has a kernel queue of its own that may already hold connections,
    // so every one of them must be accepted from (a socket nobody accepts on would hold its
    // queue until the old process closes, and then reset it). Spread over the loops; a loop
    // left without one joins the SO_REUSEPORT group with a new socket when the group allows it.
    // The inherited sockets of endpoint e are pending_[first..]. Returns their port. Each
    // endpoint is spread over the loops on its own: every loop accepts on each address.
    std::uint16_t adopt(const listen_endpoint& e, std::size_t first,
                        std::vector<std::vector<listening_socket>>& per_loop) {
        const auto n = static_cast<unsigned>(per_loop.size());
        const std::size_t inherited = pending_.size() - first;
        std::vector<bool> has(n, false);
        for (std::size_t j = 0; j < inherited; ++j) {
            per_loop[j % n].push_back(pending_[first + j]);
            has[j % n] = true;
        }
        const std::uint16_t port = bound_port(pending_[first].fd);
        int reuse = 0;
        socklen_t len = sizeof reuse;
        ::getsockopt(pending_[first].fd, SOL_SOCKET, SO_REUSEPORT, &reuse, &len);
        unsigned idle = 0;
        for (unsigned i = 0; i < n; ++i) {
            if (has[i]) {
                continue;
            }
            if (reuse == 0) {
                ++idle;
                continue;
            }
            socket_address a = e.addr;
            set_port(a, port);
            pending_.push_back({open_endpoint_listener(e, a, reuse_port::yes, 4096), e.kind, e.role});
            per_loop[i].push_back(pending_.back());
        }
        // Not "(port N)": tools read the public port from the "listening on" line (admin.cc).
        ctx_.log.info("adopted {} inherited listening socket{} on port {} ({}){}", inherited,
                      inherited == 1 ? "" : "s", port, e.key,
                      idle == 0 ? std::string()
                                : ", " + std::to_string(idle) +
                                      " loop(s) without a listener: the inherited socket has no SO_REUSEPORT "
                                      "group to join");
        return port;
    }

    // Loop `failed` could not have its thread: the loops before it own their sockets (and close
    // them whether they serve or fail), the sockets of the rest are closed here, and the loops
    // that started are stopped and joined once each has opened or failed.
    void abandon_start(std::vector<std::future<std::string>>& ready,
                       const std::vector<std::vector<listening_socket>>& per_loop, unsigned failed) {
        for (auto& f : ready) {
            f.wait();
        }
        pending_.clear();
        for (std::size_t j = failed; j < per_loop.size(); ++j) {
            for (const listening_socket& s : per_loop[j]) {
                ::close(s.fd);
            }
        }
        stop();
        join();
    }

    void run_loop(unsigned i, const std::vector<listening_socket>& fds, std::promise<std::string>& ready) {
        const server_thread_mark mark(&ctx_);
        if (std::string error = slots_[i].open(backend_, ctx_, i, mu_); !error.empty()) {
            for (const listening_socket& s : fds) {
                ::close(s.fd);
            }
            ready.set_value(error);
            return;
        }
        if (!serve(i, fds, ready)) {
            // Only now, with the listeners (which hold a reference on the loop and cancel their
            // timers on the loop when destroyed) gone: free the loop.
            std::lock_guard lock(mu_);
            slots_[i].ctx.reset();
            slots_[i].loop.reset();
        }
    }

    // Runs loop i with a listener on each of fds until the loop ends; false if a listener could
    // not start (reported through ready). The listeners live exactly as long as this frame.
    bool serve(unsigned i, const std::vector<listening_socket>& fds, std::promise<std::string>& ready) {
        loop& l = *slots_[i].loop;
        loop_context& lc = *slots_[i].ctx;
        std::vector<std::unique_ptr<listener>> listeners;
        for (std::size_t k = 0; k < fds.size(); ++k) {
            try {
                // What the socket speaks is fixed here, per socket: each connection it accepts
                // is TLS or not accordingly (adopt_connection).
                listeners.push_back(
                    std::make_unique<listener>(l, fds[k].fd, [&lc, kind = fds[k].kind](int conn_fd) {
                        adopt_connection(lc, conn_fd, kind);
                    }));
            } catch (const std::bad_alloc&) {
                for (std::size_t rest = k; rest < fds.size(); ++rest) {
                    ::close(fds[rest].fd);
                }
                ready.set_value("out of memory");
                return false;
            }
        }
        for (auto& lst : listeners) {
            if (!lst->start()) {
                ready.set_value(std::string(backend_.name) + ": cannot accept on the listening socket");
                return false;
            }
        }
        l.on_stop([&listeners, &lc] {
            for (auto& lst : listeners) {
                lst->close();
            }
            lc.begin_shutdown();
        });
        {
            std::lock_guard lock(mu_);
            if (stopped_) {
                l.stop();
            }
        }
        ready.set_value("");
        l.run();
        // How evenly SO_REUSEPORT spread the connections (the kernel hashes the 4-tuple).
        ctx_.log.info("loop {}: {} connections accepted, {} requests", i,
                      lc.counters.accepted.load(std::memory_order_relaxed),
                      lc.counters.requests.load(std::memory_order_relaxed));
        return true;
    }

    const io::backend& backend_;
    server_context& ctx_;
    mutable std::mutex mu_;
    std::vector<loop_thread> slots_;
    std::vector<listening_socket> pending_;
    std::vector<listening_socket> listening_;                 // under mu_: what a hand-over sends
    std::array<std::uint16_t, max_listen_endpoints> ports_{}; // written by start() only
    bool stopped_ = false;
};

} // namespace

std::unique_ptr<runtime> make_reactor_runtime(const io::backend& b, server_context& ctx) {
    return std::make_unique<reactor_runtime>(b, ctx);
}

} // namespace sluice::detail
