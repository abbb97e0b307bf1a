// Protocol engine micro benchmarks: parsing what wrk sends (one request, and a pipelined
// batch of 16) and serializing a small response. Bytes/s and items (requests or
// responses)/s; steady state, so the request and buffers are reused as a connection would.
#include <benchmark/benchmark.h>
#include <llhttp.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <sluice/request.h>
#include <sluice/response.h>

#include "http/server_session.h"
#include "typical_requests.h"

namespace {

using namespace sluice;

// wrk's default request (wrk 4.x, no script).
constexpr std::string_view wrk_get = "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

// A browser-like request: a more typical head with a dozen headers.
constexpr std::string_view browser_get =
    "GET /api/users/42?fields=name,email HTTP/1.1\r\n"
    "Host: api.example.com\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n"
    "Accept: application/json, text/plain, */*\r\n"
    "Accept-Language: en-US,en;q=0.5\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Referer: https://example.com/users\r\n"
    "Connection: keep-alive\r\n"
    "Cookie: session=0123456789abcdef0123456789abcdef; theme=dark\r\n"
    "Sec-Fetch-Dest: empty\r\n"
    "Sec-Fetch-Mode: cors\r\n"
    "Sec-Fetch-Site: same-site\r\n"
    "\r\n";

void parse_one_request(benchmark::State& state, std::string_view in) {
    http::server_session session{http::session_limits{}};
    request req;
    for (auto _ : state) {
        const http::feed_result r = session.feed(in, req);
        if (r.status != http::feed_status::request_ready) {
            state.SkipWithError("request not parsed");
            break;
        }
        benchmark::DoNotOptimize(req.header_count());
        req.clear();
        session.next_request();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(in.size()));
    state.SetItemsProcessed(state.iterations());
}

void BM_parse_wrk_get(benchmark::State& state) {
    parse_one_request(state, wrk_get);
}
BENCHMARK(BM_parse_wrk_get);

using bench::typical_get; // ~300 bytes; bm_path_get_root parses the same bytes

void BM_parse_typical_get(benchmark::State& state) {
    parse_one_request(state, typical_get);
}
BENCHMARK(BM_parse_typical_get);

void BM_parse_browser_get(benchmark::State& state) {
    parse_one_request(state, browser_get);
}
BENCHMARK(BM_parse_browser_get);

// The floor under the two rows above: llhttp alone on the same bytes, with no callback but the
// one that stops it at the end of the message (what server_session does). Whatever the parse
// rows cost beyond this is the session's: checks, and marking the fields in the request.
int pause_at_message_end(llhttp_t*) {
    return HPE_PAUSED;
}

void llhttp_alone(benchmark::State& state, std::string_view in) {
    llhttp_settings_t settings;
    llhttp_settings_init(&settings);
    settings.on_message_complete = &pause_at_message_end;
    llhttp_t parser;
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    for (auto _ : state) {
        if (llhttp_execute(&parser, in.data(), in.size()) != HPE_PAUSED) {
            state.SkipWithError("request not parsed");
            break;
        }
        llhttp_reset(&parser);
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(in.size()));
    state.SetItemsProcessed(state.iterations());
}

void BM_llhttp_alone_wrk_get(benchmark::State& state) {
    llhttp_alone(state, wrk_get);
}
BENCHMARK(BM_llhttp_alone_wrk_get);

void BM_llhttp_alone_typical_get(benchmark::State& state) {
    llhttp_alone(state, typical_get);
}
BENCHMARK(BM_llhttp_alone_typical_get);

// wrk with a pipelining script: 16 requests per read, answered in order by re-feeding from
// the consumed offset.
void BM_parse_pipelined_16(benchmark::State& state) {
    std::string batch;
    for (int i = 0; i < 16; ++i) {
        batch.append(wrk_get);
    }
    http::server_session session{http::session_limits{}};
    request req;
    for (auto _ : state) {
        std::string_view rest = batch;
        while (!rest.empty()) {
            const http::feed_result r = session.feed(rest, req);
            if (r.status != http::feed_status::request_ready) {
                state.SkipWithError("request not parsed");
                return;
            }
            rest.remove_prefix(r.consumed);
            benchmark::DoNotOptimize(req.path());
            req.clear();
            session.next_request();
        }
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(batch.size()));
    state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_parse_pipelined_16);

// A 64 KB upload, chunked in 4 KB chunks (a client streaming a file): the body path.
void BM_parse_chunked_64k(benchmark::State& state) {
    std::string in = "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nTransfer-Encoding: chunked\r\n\r\n";
    const std::string chunk(4096, 'x');
    for (int i = 0; i < 16; ++i) {
        in.append("1000\r\n").append(chunk).append("\r\n");
    }
    in.append("0\r\n\r\n");
    http::session_limits limits{};
    http::server_session session{limits};
    request req;
    for (auto _ : state) {
        const http::feed_result r = session.feed(in, req);
        if (r.status != http::feed_status::request_ready || req.body().size() != 65536) {
            state.SkipWithError("request not parsed");
            break;
        }
        req.clear();
        session.next_request();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(in.size()));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_parse_chunked_64k);

// The "plaintext" response: a small text body, the Date from the cache, keep-alive.
void BM_serialize_small_response(benchmark::State& state) {
    http::date_cache dates;
    response res;
    res.text("Hello, World!");
    res.header("Server", "sluice");
    const http::response_framing framing{};
    std::string out;
    std::size_t bytes = 0;
    for (auto _ : state) {
        out.clear();
        http::serialize_response(res, framing, dates.get(std::chrono::system_clock::now()), out);
        bytes += out.size();
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_serialize_small_response);

// A chunk of a streamed response.
void BM_serialize_chunk(benchmark::State& state) {
    const std::string data(static_cast<std::size_t>(state.range(0)), 'x');
    const http::response_framing framing{};
    std::string out;
    for (auto _ : state) {
        out.clear();
        http::serialize_chunk(data, framing, out);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(data.size()));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_serialize_chunk)->Arg(64)->Arg(4096);

} // namespace
