// The upstream client's protocol work per call, without a socket: writing a proxied request's
// head (what the gateway forwards: a handful of end-to-end headers and X-Forwarded-For), and
// parsing a small keep-alive JSON response, with Content-Length and chunked.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <sluice/client.h>

#include "http/client_request_writer.h"
#include "http/client_session.h"

namespace {

using namespace sluice;

client_request proxied_get() {
    client_request req;
    req.method = "GET";
    req.target = "/work?ms=3000&user=42";
    req.headers = {{"Accept", "application/json"},
                   {"User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"},
                   {"Accept-Encoding", "gzip, deflate, br"},
                   {"X-Forwarded-For", "203.0.113.7"},
                   {"X-Request-Id", "3f1b2c9e-5a4d-4e8f-9b0a-7c6d5e4f3a2b"}};
    return req;
}

void bm_client_write_request_head(benchmark::State& state) {
    const client_request req = proxied_get();
    std::string out;
    out.reserve(512);
    for (auto _ : state) {
        out.clear();
        if (http::write_request_head(req, "backend.internal:8081", out)) {
            state.SkipWithError("request refused");
            break;
        }
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(out.size()));
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(bm_client_write_request_head);

std::string fmt_chunk(std::string_view data) {
    char size[20];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return std::string(size, static_cast<std::size_t>(n)) + std::string(data) + "\r\n";
}

constexpr std::string_view json_body = R"({"id":42,"name":"Ada","email":"ada@example.com","ok":true})";

std::string length_response() {
    return "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 08:00:00 GMT\r\nServer: sluice\r\n"
           "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(json_body.size()) + "\r\n\r\n" + std::string(json_body);
}

std::string chunked_response() {
    return "HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 08:00:00 GMT\r\nServer: sluice\r\n"
           "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
           fmt_chunk(json_body) + "0\r\n\r\n";
}

void parse_response(benchmark::State& state, const std::string& bytes) {
    const client_options defaults;
    http::client_session session(defaults.max_response_bytes, defaults.max_response_head_bytes);
    client_response out;
    for (auto _ : state) {
        out.status = 0;
        out.headers.clear();
        out.body.clear();
        session.begin(false, out);
        if (session.feed(bytes) != bytes.size() || session.phase() != http::response_phase::complete) {
            state.SkipWithError("response not parsed");
            break;
        }
        benchmark::DoNotOptimize(out.body.data());
    }
    state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
    state.SetItemsProcessed(state.iterations());
}

void bm_client_parse_response_length(benchmark::State& state) {
    parse_response(state, length_response());
}
BENCHMARK(bm_client_parse_response_length);

void bm_client_parse_response_chunked(benchmark::State& state) {
    parse_response(state, chunked_response());
}
BENCHMARK(bm_client_parse_response_chunked);

} // namespace
