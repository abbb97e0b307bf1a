#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
        for (int fd : pending_fds_) {
            ::close(fd);
        }
    }

    void start(const socket_address& addr, std::vector<int> adopted) override {
        const unsigned n = ctx_.cfg.io_threads;
        // Owned here until the loops take them: the destructor closes what a failed start left.
        pending_fds_ = std::move(adopted);
        std::vector<std::vector<int>> per_loop(n);
        if (!pending_fds_.empty()) {
            adopt(addr, per_loop);
        } else {
            bind(addr, per_loop);
        }
        {
            std::lock_guard lock(mu_);
            listening_ = pending_fds_;
        }
        slots_.resize(n);
        std::vector<std::future<std::string>> ready;
        for (unsigned i = 0; i < n; ++i) {
            std::promise<std::string> p;
            ready.push_back(p.get_future());
            slots_[i].thread = std::thread(
                [this, i, fds = std::move(per_loop[i]), p = std::move(p)]() mutable { run_loop(i, fds, p); });
        }
        std::string error;
        for (auto& f : ready) {
            std::string e = f.get();
            if (!e.empty() && error.empty()) {
                error = std::move(e);
            }
        }
        pending_fds_.clear(); // owned by the listeners now (or closed by failed threads)
        if (!error.empty()) {
            stop();
            join();
            throw startup_error("backend", error);
        }
    }

    std::vector<int> listening_fds() const override {
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

    std::uint16_t port() const noexcept override { return port_; }

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
    void bind(const socket_address& addr, std::vector<std::vector<int>>& per_loop) {
        const auto n = static_cast<unsigned>(per_loop.size());
        // SO_REUSEPORT would also let us join a port that another process (of the same user)
        // holds with SO_REUSEPORT: a plain bind first makes "address in use" an error instead.
        if (n > 1 && port_of(addr) != 0) {
            ::close(open_listener(addr, reuse_port::no, 1));
        }
        for (unsigned i = 0; i < n; ++i) {
            socket_address a = addr;
            if (i > 0) {
                set_port(a, port_);
            }
            pending_fds_.push_back(open_listener(a, n > 1 ? reuse_port::yes : reuse_port::no, 4096));
            per_loop[i].push_back(pending_fds_.back());
            if (i == 0) {
                port_ = bound_port(pending_fds_.back());
            }
        }
    }

    // Inherited sockets: each has a kernel queue of its own that may already hold connections,
    // so every one of them must be accepted from (a socket nobody accepts on would hold its
    // queue until the old process closes, and then reset it). Spread over the loops; a loop
    // left without one joins the SO_REUSEPORT group with a new socket when the group allows it.
    void adopt(const socket_address& addr, std::vector<std::vector<int>>& per_loop) {
        const auto n = static_cast<unsigned>(per_loop.size());
        const std::size_t inherited = pending_fds_.size();
        for (std::size_t j = 0; j < inherited; ++j) {
            per_loop[j % n].push_back(pending_fds_[j]);
        }
        port_ = bound_port(pending_fds_.front());
        int reuse = 0;
        socklen_t len = sizeof reuse;
        ::getsockopt(pending_fds_.front(), SOL_SOCKET, SO_REUSEPORT, &reuse, &len);
        unsigned idle = 0;
        for (unsigned i = 0; i < n; ++i) {
            if (!per_loop[i].empty()) {
                continue;
            }
            if (reuse == 0) {
                ++idle;
                continue;
            }
            socket_address a = addr;
            set_port(a, port_);
            pending_fds_.push_back(open_listener(a, reuse_port::yes, 4096));
            per_loop[i].push_back(pending_fds_.back());
        }
        // Not "(port N)": tools read the public port from the "listening on" line (admin.cc).
        ctx_.log.info("adopted {} inherited listening socket{} on port {}{}", inherited,
                      inherited == 1 ? "" : "s", port_,
                      idle == 0 ? std::string()
                                : ", " + std::to_string(idle) +
                                      " loop(s) without a listener: the inherited socket has no SO_REUSEPORT "
                                      "group to join");
    }

    void run_loop(unsigned i, const std::vector<int>& fds, std::promise<std::string>& ready) {
        const server_thread_mark mark(&ctx_);
        if (std::string error = slots_[i].open(backend_, ctx_, i, mu_); !error.empty()) {
            for (int fd : fds) {
                ::close(fd);
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
    bool serve(unsigned i, const std::vector<int>& fds, std::promise<std::string>& ready) {
        loop& l = *slots_[i].loop;
        loop_context& lc = *slots_[i].ctx;
        std::vector<std::unique_ptr<listener>> listeners;
        for (std::size_t k = 0; k < fds.size(); ++k) {
            try {
                listeners.push_back(std::make_unique<listener>(
                    l, fds[k], [&lc](int conn_fd) { adopt_connection(lc, conn_fd); }));
            } catch (const std::bad_alloc&) {
                for (std::size_t rest = k; rest < fds.size(); ++rest) {
                    ::close(fds[rest]);
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
    std::vector<int> pending_fds_;
    std::vector<int> listening_; // under mu_: what a hand-over sends
    std::uint16_t port_ = 0;
    bool stopped_ = false;
};

} // namespace

std::unique_ptr<runtime> make_reactor_runtime(const io::backend& b, server_context& ctx) {
    return std::make_unique<reactor_runtime>(b, ctx);
}

} // namespace sluice::detail
