// What the TLS decorator (tls/tls_driver.h) costs a plaintext descriptor: every reactor loop
// carries it so that handlers may call https upstreams, so a plaintext request/response pays
// its table look-up per verb and bit test per completion. A null driver stands for the
// backend (no syscall): one keep-alive exchange = recv + send + wait() returning the recv and
// send completions + release(); measured bare and wrapped.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <sluice/backend.h>

#include "tls/tls_driver.h"

namespace {

using namespace sluice;

class null_driver final : public io::driver {
public:
    int accept(int, void*) noexcept override { return 0; }
    int recv(int, void* owner) noexcept override {
        owner_ = owner;
        return 0;
    }
    void pause_recv(int, void*) noexcept override {}
    int send(int, const iovec*, int, void*) noexcept override { return 0; }
    int connect(int, const sockaddr*, socklen_t, void*) noexcept override { return 0; }
    int shutdown_send(int) noexcept override { return 0; }
    void close(int, void*) noexcept override {}
    int wait(std::chrono::nanoseconds, std::vector<io::completion>& out) noexcept override {
        out.push_back({owner_, io::op::recv, true, 300, 1, data_});
        out.push_back({owner_, io::op::send, false, 200, io::no_buffer, nullptr});
        return 2;
    }
    void release(std::uint32_t) noexcept override {}
    void wake() noexcept override {}

private:
    void* owner_ = nullptr;
    const char* data_ = "GET / HTTP/1.1\r\n\r\n";
};

void exchange_loop(benchmark::State& state, io::driver& d) {
    alignas(8) static char owner_object[8];
    std::vector<io::completion> out;
    out.reserve(16);
    const iovec iov{owner_object, 8};
    constexpr int fd = 7;
    for (auto _ : state) {
        d.recv(fd, owner_object);
        d.send(fd, &iov, 1, owner_object);
        out.clear();
        d.wait(std::chrono::nanoseconds(0), out);
        d.release(out[0].buffer);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(state.iterations());
}

void bm_plaintext_exchange_bare(benchmark::State& state) {
    null_driver d;
    exchange_loop(state, d);
}
BENCHMARK(bm_plaintext_exchange_bare);

void bm_plaintext_exchange_through_tls_decorator(benchmark::State& state) {
    detail::tls_driver d(std::make_unique<null_driver>(), nullptr);
    exchange_loop(state, d);
}
BENCHMARK(bm_plaintext_exchange_through_tls_decorator);

} // namespace
