// The whole engine path of one keep-alive request, without the socket: parse a typical browser
// GET, route it, run the handler, serialize its response, and get the request and session ready
// for the next one (what connection.cc does between a recv and a send). Issue 8's goal for
// this is ≤ 250 ns on one core; the I/O and the loop around it are measured by the scenario
// runners instead.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/exchange.h>
#include <sluice/request.h>
#include <sluice/response.h>
#include <sluice/router.h>

#include "exchange/exchange_access.h"
#include "http/request_builder.h"
#include "http/server_session.h"
#include "typical_requests.h"

namespace {

using namespace sluice;

using bench::typical_get;

router ten_routes() {
    router r;
    r.add("GET", "/", [](exchange& ex) { ex.response().text("Hello, World!"); });
    for (int i = 0; i < 9; ++i) {
        r.add("GET", "/api/v1/resource" + std::to_string(i) + "/{id}", [](exchange&) {});
    }
    return r;
}

void bm_path_get_root(benchmark::State& state) {
    const router routes = ten_routes();
    http::server_session session{http::session_limits{}};
    http::date_cache dates;
    exchange ex;
    request& req = detail::exchange_access::request(ex);
    std::vector<router::param> params;
    params.reserve(8);
    std::string out;
    out.reserve(512);
    for (auto _ : state) {
        if (session.feed(typical_get, req).status != http::feed_status::request_ready) {
            state.SkipWithError("request not parsed");
            break;
        }
        const auto m = routes.match(req.method(), req.path(), params);
        if (m.target == nullptr || !detail::request_builder(req).set_path_params(params)) {
            state.SkipWithError("not routed");
            break;
        }
        (*m.target)(ex);
        const http::response_framing framing{req.version(), false, req.keep_alive()};
        out.clear();
        http::serialize_response(ex.response(), framing, dates.get(std::chrono::system_clock::now()), out);
        benchmark::DoNotOptimize(out.data());
        req.clear();
        ex.response().clear();
        session.next_request();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(typical_get.size()));
    state.SetItemsProcessed(state.iterations());
    state.counters["request_bytes"] = static_cast<double>(typical_get.size());
}
BENCHMARK(bm_path_get_root);

} // namespace
