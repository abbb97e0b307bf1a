// The in-memory driver of the unit tests, steered by the fuzz input: each wait() delivers the
// next piece size of a cycled list (so requests arrive split at input-chosen points), sends
// accept at most send_limit bytes (partial writes), and the client half-closes only when the
// loop has nothing else to do (a wait with a non-zero timeout that finds nothing), so every
// complete request was seen and every async completion posted before the end of stream.
#pragma once

#include <cstddef>
#include <vector>

#include "fakes/fake_driver.h"

namespace sluice::fuzz {

class split_driver final : public io::driver {
public:
    static constexpr int fd = 100;

    testing::fake_driver inner;
    std::vector<std::size_t> pieces; ///< cycled; 0 = everything still to deliver

    int accept(int l, void* o) noexcept override { return inner.accept(l, o); }
    int recv(int f, void* o) noexcept override { return inner.recv(f, o); }
    void pause_recv(int f, void* o) noexcept override { inner.pause_recv(f, o); }
    int send(int f, const iovec* iov, int n, void* o) noexcept override { return inner.send(f, iov, n, o); }
    int connect(int f, const sockaddr* a, socklen_t l, void* o) noexcept override {
        return inner.connect(f, a, l, o);
    }
    int shutdown_send(int f) noexcept override { return inner.shutdown_send(f); }
    void close(int f, void* o) noexcept override { inner.close(f, o); }
    void release(std::uint32_t b) noexcept override { inner.release(b); }
    void wake() noexcept override {}

    int wait(std::chrono::nanoseconds timeout, std::vector<io::completion>& out) noexcept override {
        if (!pieces.empty()) {
            const std::size_t p = pieces[next_++ % pieces.size()];
            inner.chunk = p == 0 ? static_cast<std::size_t>(-1) : p;
        }
        const int n = inner.wait(timeout, out);
        if (n == 0 && timeout != std::chrono::nanoseconds(0)) {
            inner.peers[fd].eof_at_end = true; // idle: now the client may go
            return inner.wait(timeout, out);
        }
        return n;
    }

private:
    std::size_t next_ = 0;
};

} // namespace sluice::fuzz
