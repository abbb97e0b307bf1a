// Router matching among ~50 routes: a static route and a two-parameter route, plus the 404
// and 405 paths. Each benchmark also counts heap allocations per match: the router promises
// none on a successful match (router.h), and this is where that promise is measured.

#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include <sluice/router.h>

namespace {

std::atomic<std::uint64_t> allocations{0};

} // namespace

// A counting replacement of the global allocation function. Weak, so that another benchmark
// file with a counter of its own does not break the link; each benchmark first checks that this
// counter is the live one and says so if it is not.
__attribute__((weak)) void* operator new(std::size_t size) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size == 0 ? 1 : size)) {
        return p;
    }
    throw std::bad_alloc();
}
__attribute__((weak)) void operator delete(void* p) noexcept {
    std::free(p);
}
__attribute__((weak)) void operator delete(void* p, std::size_t /*size*/) noexcept {
    std::free(p);
}

namespace {

struct noop {
    void operator()(sluice::exchange& /*unused*/) const {}
};

// A service-shaped table: 17 hand-written routes and 34 generated ones, 51 in all.
sluice::router make_router() {
    sluice::router r;
    constexpr std::array<std::array<const char*, 2>, 17> fixed{{
        {"GET", "/"},
        {"GET", "/health"},
        {"GET", "/metrics"},
        {"GET", "/api/v1/status"},
        {"GET", "/api/v1/users"},
        {"POST", "/api/v1/users"},
        {"GET", "/api/v1/users/me"},
        {"GET", "/api/v1/users/{id}"},
        {"PUT", "/api/v1/users/{id}"},
        {"DELETE", "/api/v1/users/{id}"},
        {"GET", "/api/v1/users/{id}/posts"},
        {"GET", "/api/v1/users/{id}/posts/{post}"},
        {"GET", "/api/v1/orgs/{org}"},
        {"GET", "/api/v1/orgs/{org}/repos"},
        {"GET", "/api/v1/orgs/{org}/repos/{repo}"},
        {"PATCH", "/api/v1/orgs/{org}/repos/{repo}"},
        {"GET", "/static/{path...}"},
    }};
    for (const auto& [method, pattern] : fixed) {
        r.add(method, pattern, noop{});
    }
    for (int i = 0; i < 17; ++i) {
        const std::string base = "/api/v1/resource" + std::to_string(i);
        r.add("GET", base, noop{});
        r.add("GET", base + "/{id}", noop{});
    }
    return r;
}

bool counter_is_live() {
    const std::uint64_t before = allocations.load(std::memory_order_relaxed);
    auto* probe = new int(1);
    benchmark::DoNotOptimize(probe);
    delete probe;
    return allocations.load(std::memory_order_relaxed) != before;
}

// A generated table of n routes, half static and half with a parameter, for how matching
// scales with the table (issue 8: 10 and 1,000 routes).
sluice::router make_router(int n) {
    sluice::router r;
    for (int i = 0; i < n / 2; ++i) {
        const std::string base = "/api/v1/resource" + std::to_string(i);
        r.add("GET", base, noop{});
        r.add("GET", base + "/{id}", noop{});
    }
    return r;
}

void run_with(benchmark::State& state, const sluice::router& r, const char* method, std::string_view path,
              int expected_status) {
    std::vector<sluice::router::param> params;
    params.reserve(8);
    if (!counter_is_live()) {
        state.SkipWithError("allocation counter is not the live operator new");
        return;
    }
    if (r.match(method, path, params).status != expected_status) {
        state.SkipWithError("unexpected match result");
        return;
    }
    const std::uint64_t before = allocations.load(std::memory_order_relaxed);
    for (auto _ : state) {
        auto result = r.match(method, path, params);
        benchmark::DoNotOptimize(result);
        benchmark::DoNotOptimize(params.data());
    }
    const auto allocs = static_cast<double>(allocations.load(std::memory_order_relaxed) - before);
    state.counters["allocs/match"] = benchmark::Counter(allocs / static_cast<double>(state.iterations()));
}

void run(benchmark::State& state, const char* method, std::string_view path, int expected_status) {
    run_with(state, make_router(), method, path, expected_status);
}

// The last-added static route and a parameter route near the end of a table of n routes.
void bm_router_n_static(benchmark::State& state) {
    const auto n = static_cast<int>(state.range(0));
    run_with(state, make_router(n), "GET", "/api/v1/resource" + std::to_string(n / 2 - 1), 0);
}
void bm_router_n_param(benchmark::State& state) {
    const auto n = static_cast<int>(state.range(0));
    run_with(state, make_router(n), "GET", "/api/v1/resource" + std::to_string(n / 2 - 1) + "/42", 0);
}

void bm_router_static(benchmark::State& state) {
    run(state, "GET", "/api/v1/status", 0);
}
void bm_router_two_params(benchmark::State& state) {
    run(state, "GET", "/api/v1/orgs/acme/repos/sluice", 0);
}
void bm_router_head_via_get(benchmark::State& state) {
    run(state, "HEAD", "/api/v1/users/42/posts/7", 0);
}
void bm_router_tail(benchmark::State& state) {
    run(state, "GET", "/static/css/site/main.css", 0);
}
void bm_router_not_found(benchmark::State& state) {
    run(state, "GET", "/api/v1/nothing/here", 404);
}
void bm_router_method_not_allowed(benchmark::State& state) {
    run(state, "POST", "/api/v1/users/42", 405);
}

} // namespace

BENCHMARK(bm_router_static);
BENCHMARK(bm_router_two_params);
BENCHMARK(bm_router_head_via_get);
BENCHMARK(bm_router_tail);
BENCHMARK(bm_router_not_found);
BENCHMARK(bm_router_method_not_allowed);
BENCHMARK(bm_router_n_static)->Arg(10)->Arg(1'000);
BENCHMARK(bm_router_n_param)->Arg(10)->Arg(1'000);
