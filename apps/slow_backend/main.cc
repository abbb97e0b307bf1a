// sluice-slow-backend: the upstream of the 3-second scenarios (SCENARIOS.md S1, S3).
//
//   GET  /work?ms=N     answers after N ms (default 3000) from a loop timer: any number at once
//   GET  /files         a JSON list of 100 objects (S3's list)
//   POST /upload        reads the body through a shared link of --bandwidth-mbit (default 74,
//                       S3's uplink; 0 = unlimited) and answers {"bytes":N,"fnv1a64":"..."}
//   GET  /bytes?n=N     streams N bytes (with Content-Length: N), 64 KiB each time the output drained
//   GET  /stats         {"in_flight":..,"max_in_flight":..,"served":..}
//   POST /stats/reset   zeroes served and max_in_flight
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/sluice.h>

#include "../common/app_main.h"
#include "backend_stats.h"
#include "shared_link.h"

namespace slow_backend {
namespace {

constexpr std::uint64_t max_work_ms = 600'000;
constexpr std::uint64_t max_stream_bytes = std::uint64_t{1} << 40; // 1 TiB: any test, no overflow
constexpr std::size_t stream_chunk = std::size_t{64} * 1024;

std::optional<std::uint64_t> parse_u64(std::string_view v) {
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
        return std::nullopt;
    }
    return n;
}

// Whether the raw query has a parameter of that name (with or without a value).
bool has_param(std::string_view query, std::string_view name) {
    while (!query.empty()) {
        const auto amp = query.find('&');
        std::string_view part = query.substr(0, amp);
        if (part.substr(0, part.find('=')) == name) {
            return true;
        }
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    return false;
}

// ?name=N within [0, max]; the default when absent; nullopt (→ 400) when malformed.
std::optional<std::uint64_t> query_u64(const sluice::request& req, std::string_view name, std::uint64_t dflt,
                                       std::uint64_t max) {
    auto v = req.query_param(name);
    if (!v) {
        return has_param(req.query(), name) ? std::nullopt : std::optional(dflt); // present but malformed
    }
    auto n = parse_u64(*v);
    if (!n || *n > max) {
        return std::nullopt;
    }
    return n;
}

std::uint64_t fnv1a64(std::string_view data) noexcept {
    std::uint64_t h = 14695981039346656037ull;
    for (char c : data) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}

std::string hex64(std::uint64_t v) {
    char buf[17];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, 16);
    (void)ec;
    std::string s(buf, end);
    return std::string(16 - s.size(), '0') + s;
}

std::string files_json() {
    std::string out = "[";
    for (int i = 0; i < 100; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "object-%03d.bin", i);
        if (i > 0) {
            out += ',';
        }
        out += "{\"name\":\"" + std::string(name) + "\",\"size\":" + std::to_string(74'000 + i * 37) +
               ",\"etag\":\"" + hex64(fnv1a64(name)) + "\"}";
    }
    return out + "]";
}

// The byte pattern of /bytes: byte i of each stream_chunk piece carries 'a' + i % 26 (the pattern
// restarts with every piece, as 65,536 is not a multiple of 26): byte n of a body is
// 'a' + (n % stream_chunk) % 26, so a reader can check any slice.
std::string stream_pattern() {
    std::string s(stream_chunk, '\0');
    for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = static_cast<char>('a' + i % 26);
    }
    return s;
}

struct app {
    backend_stats stats;
    std::unique_ptr<shared_link> link; // null: unlimited
    std::string files = files_json();
    std::string pattern = stream_pattern();
};

// Counts the exchange in flight until it ends, whatever the outcome.
void track(app& a, sluice::exchange& ex) {
    a.stats.begin();
    ex.context().on_complete([&a](const sluice::async_event& ev) { a.stats.end(!ev.error); });
}

void bad_request(sluice::exchange& ex, std::string_view why) {
    ex.response().status(400).text(std::string(why) + "\n");
}

void add_routes(sluice::server& srv, app& a) {
    srv.get("/work", [&a](sluice::exchange& ex) {
        auto ms = query_u64(ex.request(), "ms", 3000, max_work_ms);
        if (!ms) {
            return bad_request(ex, "expected ?ms=N with 0 <= N <= 600000");
        }
        auto ctx =
            ex.start_async(std::chrono::milliseconds(*ms + 60'000)); // the timer, not the timeout, ends it
        track(a, ex);
        ex.executor().post_after(std::chrono::milliseconds(*ms), [ctx, ms = *ms]() mutable {
            ctx.complete(sluice::response(200).json("{\"waited_ms\":" + std::to_string(ms) + "}"));
        });
    });

    srv.get("/files", [&a](sluice::exchange& ex) {
        ex.set_attribute("sluice.slow_backend", true); // the state its on_complete lives in
        track(a, ex);
        ex.response().json(a.files);
    });

    srv.post("/upload", [&a](sluice::exchange& ex) {
        const std::string_view body = ex.request().body();
        sluice::response answer(200);
        answer.json("{\"bytes\":" + std::to_string(body.size()) + ",\"fnv1a64\":\"" + hex64(fnv1a64(body)) +
                    "\"}");
        if (!a.link) {
            ex.set_attribute("sluice.slow_backend", true);
            track(a, ex);
            ex.response() = std::move(answer);
            return;
        }
        auto ctx = ex.start_async();
        track(a, ex);
        a.link->send(ex.executor(), ctx, body.size(), std::move(answer));
    });

    // Resume style: each dispatch writes one chunk, then waits for the output to drain.
    srv.get("/bytes", [&a](sluice::exchange& ex) {
        std::uint64_t left = 0;
        if (ex.is_initial()) {
            auto n = query_u64(ex.request(), "n", 0, max_stream_bytes);
            if (!n) {
                return bad_request(ex, "expected ?n=N bytes");
            }
            ex.set_attribute("sluice.slow_backend", true);
            track(a, ex);
            // The length is known up front, as for a file: the client sees it (progress, and
            // a gateway in front passes it on) while the body still streams.
            ex.response().content_type("application/octet-stream").content_length(*n);
            left = *n;
        } else {
            left = ex.attribute<std::uint64_t>("left").value_or(0);
        }
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, stream_chunk));
        ex.response().write(std::string_view(a.pattern).substr(0, n));
        left -= n;
        if (left == 0) {
            return; // the stream ends with the exchange
        }
        ex.set_attribute("left", left);
        auto ctx = ex.start_async();
        // The chunk goes out when this returns; the next is written once the connection's queued
        // output has drained to the low-water mark: a slow reader holds at most ~128 KiB here.
        ctx.on_drained([ctx]() mutable { ctx.resume(); });
    });

    srv.get("/stats", [&a](sluice::exchange& ex) { ex.response().json(a.stats.json()); });
    srv.post("/stats/reset", [&a](sluice::exchange& ex) {
        a.stats.reset();
        ex.response().json(a.stats.json());
    });
}

} // namespace
} // namespace slow_backend

int main(int argc, char** argv) {
    return apps::run_app("sluice-slow-backend", [&] {
        std::string bandwidth = "74";
        const sluice::app_option options[] = {
            {"bandwidth-mbit", "MBIT",
             "the uplink shared by all uploads, in Mbit/s (default 74, S3's; 0 = unlimited)", &bandwidth},
        };
        auto cl = sluice::parse_command_line(argc, argv, sluice::process_environment(), options,
                                             "sluice-slow-backend: a slow upstream (delayed /work, /files, "
                                             "bandwidth-limited /upload, streamed /bytes, /stats)");
        if (cl.help) {
            std::fputs(cl.usage.c_str(), stdout);
            return 0;
        }
        slow_backend::app a; // outlives the server: its timers and listeners refer to it
        {
            auto mbit = slow_backend::parse_u64(bandwidth);
            if (!mbit || *mbit > 1'000'000) {
                throw sluice::startup_error("bandwidth-mbit",
                                            "expected a whole number of Mbit/s in [0, 1000000], got \"" +
                                                bandwidth + "\"");
            }
            if (*mbit > 0) {
                a.link = std::make_unique<slow_backend::shared_link>(static_cast<double>(*mbit) * 1e6 / 8.0);
            }
        }
        sluice::server srv(cl.cfg);
        slow_backend::add_routes(srv, a);
        srv.run_until_signal();
        return 0;
    });
}
