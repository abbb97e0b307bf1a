// An in-memory driver (STYLE.md rule 7): no sockets, no waiting, deterministic.
//
// Each fake descriptor is a peer with a script of inbound bytes. Receiving delivers
// at most `chunk` bytes per completion (1 = one byte per read), sends append to the
// peer's outbound bytes (at most `send_limit` per send, to exercise partial writes),
// and the N-th operation (counting receive deliveries and sends from 0) can be made to
// fail: a receive as a reset, a send as a broken pipe. wait() never blocks; past a
// wall-clock deadline it aborts the process, so a test that would hang fails instead.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include <sluice/backend.h>

namespace sluice::testing {

class fake_driver final : public io::driver {
public:
    struct peer {
        std::string inbound;
        std::size_t delivered = 0;
        std::string outbound;
        void* owner = nullptr;
        bool receiving = false;
        bool paused = false;
        bool closed = false;
        bool write_shut = false; ///< shutdown_send() was called
        bool eof_at_end = false; ///< deliver end-of-stream once every inbound byte went out
        bool eof_sent = false;
        /// With eof_at_end: the FIN is in the socket behind the bytes not yet delivered, and a
        /// paused receive hears it as a hang-up (rule 6: 0, more == false), once per pause,
        /// before those bytes, as epoll and io_uring report it.
        bool hang_up_while_paused = false;
        bool hang_up_told = false;
        /// Reads a pause does not stop: that many more pieces come in the next wait, as reads
        /// completed before the pause took effect (an io_uring multishot batch), and the pause's
        /// final completion in the wait after it, followed in that batch by the hang-up (with
        /// hang_up_while_paused): the order in which io_uring and epoll can report them when
        /// the receiver resumed meanwhile (loop/paused_hang_up.h).
        std::size_t reads_after_pause = 0;
        /// Waits with nothing for this peer between those reads and the pause's final completion.
        std::size_t waits_before_cancel = 0;
        bool cancel_due = false;
        bool late_reads_done = false;
        std::vector<iovec> held; ///< hold_sends: the send in flight, read at its completion
        void* held_owner = nullptr;
        std::size_t quiet_waits_left = 0;
    };

    std::size_t chunk = static_cast<std::size_t>(-1);
    std::size_t send_limit = static_cast<std::size_t>(-1);
    /// connect() succeeds (its completion comes in the next batch) instead of EOPNOTSUPP.
    bool connects = false;
    /// What a connected fd then receives (a peer's inbound, as if set before).
    std::string inbound_on_connect;
    /// A send completes only at the close of its fd, reading its memory then.
    bool hold_sends = false;
    long fail_at = -1; ///< index of the operation to fail; -1: none
    /// The first sends write their bytes and report 0, as the TLS decorator reports a partial
    /// inner send (the bytes are out, the owner sends them again); the send after them fails.
    int zero_reports = 0;
    long operations = 0;
    std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::map<int, peer> peers;

    int accept(int, void*) noexcept override { return -EOPNOTSUPP; }

    int recv(int fd, void* owner) noexcept override {
        peer& p = peers[fd];
        p.owner = owner;
        p.receiving = true;
        p.paused = false;
        p.eof_sent = false; // rule 6: receiving again after the end reports it again
        return 0;
    }

    void pause_recv(int fd, void* owner) noexcept override {
        peer& p = peers[fd];
        if (p.receiving) {
            p.receiving = false;
            p.paused = true;
            p.hang_up_told = false;
            if (p.reads_after_pause > 0) {
                p.cancel_due = true;
                return;
            }
            pending_.push_back({owner, io::op::recv, false, -ECANCELED, io::no_buffer, nullptr});
        }
    }

    int send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept override {
        peer& p = peers[fd];
        if (hold_sends) {
            // As io_uring may: the memory is read when the send runs, up to its completion.
            p.held.assign(iov, iov + iovcnt);
            p.held_owner = owner;
            return 0;
        }
        if (operations++ == fail_at) {
            pending_.push_back({owner, io::op::send, false, -EPIPE, io::no_buffer, nullptr});
            return 0;
        }
        if (zero_reports < 0) {
            pending_.push_back({owner, io::op::send, false, -ECONNRESET, io::no_buffer, nullptr});
            return 0;
        }
        std::size_t total = 0;
        for (int i = 0; i < iovcnt && total < send_limit; ++i) {
            const std::size_t n = std::min(iov[i].iov_len, send_limit - total);
            p.outbound.append(static_cast<const char*>(iov[i].iov_base), n);
            total += n;
        }
        if (zero_reports > 0) {
            --zero_reports;
            if (zero_reports == 0) {
                zero_reports = -1; // the next send fails
            }
            total = 0;
        }
        pending_.push_back(
            {owner, io::op::send, false, static_cast<std::int32_t>(total), io::no_buffer, nullptr});
        return 0;
    }

    int connect(int fd, const sockaddr*, socklen_t, void* owner) noexcept override {
        if (!connects) {
            return -EOPNOTSUPP;
        }
        peers[fd].owner = owner;
        peers[fd].inbound = inbound_on_connect;
        pending_.push_back({owner, io::op::connect, false, 0, io::no_buffer, nullptr});
        return 0;
    }

    int shutdown_send(int fd) noexcept override {
        peers[fd].write_shut = true;
        return 0;
    }

    void close(int fd, void* owner) noexcept override {
        peer& p = peers[fd];
        p.closed = true;
        p.receiving = false;
        if (p.held_owner != nullptr) {
            // The worst case of a send in flight at the close: it ran just before the cancel
            // could reach it, reading the memory now (rule 7 says it may, until its completion).
            std::size_t total = 0;
            for (const iovec& v : p.held) {
                p.outbound.append(static_cast<const char*>(v.iov_base), v.iov_len);
                total += v.iov_len;
            }
            pending_.push_back({p.held_owner, io::op::send, false, static_cast<std::int32_t>(total),
                                io::no_buffer, nullptr});
            p.held.clear();
            p.held_owner = nullptr;
        }
        pending_.push_back({owner, io::op::close, false, 0, io::no_buffer, nullptr});
    }

    int wait(std::chrono::nanoseconds timeout, std::vector<io::completion>& out) noexcept override {
        last_timeout = timeout;
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "fake_driver: deadline passed, the loop did not finish\n");
            std::abort();
        }
        const std::size_t before = out.size();
        out.insert(out.end(), pending_.begin(), pending_.end());
        pending_.clear();
        for (auto& [fd, p] : peers) {
            if (p.cancel_due && !p.closed) {
                if (!p.late_reads_done) {
                    p.late_reads_done = true;
                    p.quiet_waits_left = p.waits_before_cancel;
                    for (std::size_t k = 0; k < p.reads_after_pause && p.delivered < p.inbound.size(); ++k) {
                        deliver(p, out);
                    }
                    continue;
                }
                if (p.quiet_waits_left > 0) {
                    --p.quiet_waits_left;
                    continue;
                }
                p.cancel_due = false;
                p.late_reads_done = false;
                out.push_back({p.owner, io::op::recv, false, -ECANCELED, io::no_buffer, nullptr});
            }
            if (p.paused && !p.closed && p.eof_at_end && p.hang_up_while_paused && !p.hang_up_told) {
                p.hang_up_told = true;
                out.push_back({p.owner, io::op::recv, false, 0, io::no_buffer, nullptr});
                continue;
            }
            if (!p.receiving || p.closed) {
                continue;
            }
            if (p.delivered < p.inbound.size()) {
                if (operations++ == fail_at) {
                    p.receiving = false;
                    out.push_back({p.owner, io::op::recv, false, -ECONNRESET, io::no_buffer, nullptr});
                    continue;
                }
                deliver(p, out);
            } else if (p.eof_at_end && !p.eof_sent) {
                p.eof_sent = true;
                p.receiving = false;
                out.push_back({p.owner, io::op::recv, false, 0, io::no_buffer, nullptr});
            }
        }
        return static_cast<int>(out.size() - before);
    }

    void release(std::uint32_t) noexcept override {
        ++released;
        if (released == buffers_.size()) {
            buffers_.clear(); // rule 5: every lent buffer came back before the next wait
            released = 0;
        }
    }

    void wake() noexcept override { wakes.fetch_add(1, std::memory_order_relaxed); }

    std::size_t released = 0;
    std::atomic<std::size_t> wakes{0};         ///< wake() calls, from any thread
    std::chrono::nanoseconds last_timeout{-2}; ///< what the loop asked the last wait() to wait

private:
    void deliver(peer& p, std::vector<io::completion>& out) {
        const std::size_t n = std::min(chunk, p.inbound.size() - p.delivered);
        buffers_.push_back(p.inbound.substr(p.delivered, n));
        p.delivered += n;
        out.push_back({p.owner, io::op::recv, true, static_cast<std::int32_t>(n),
                       static_cast<std::uint32_t>(buffers_.size() - 1), buffers_.back().data()});
    }

    std::vector<io::completion> pending_;
    std::deque<std::string> buffers_; // stable addresses while lent
};

} // namespace sluice::testing
