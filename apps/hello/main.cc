// sluice-hello: the smallest useful server, and the target of the backend
// conformance demos and the plaintext benchmarks.
//
//   GET  /                  "Hello, World!" (text/plain)
//   GET  /json              {"message":"Hello, World!"}
//   POST /echo              the request body back, with its Content-Type
//   GET  /delay?ms=N        suspends, completes after N ms from a loop timer (no thread sleeps)
//   GET  /delay-resume?ms=N the same in resume style (the handler runs again)
//   GET  /co?ms=N           the same as a coroutine: co_await sluice::sleep_for, then answer
//   GET  /sleep?ms=N        a sync handler that blocks its thread for N ms
//   GET  /bytes?n=N         N bytes of 'x' (N <= 1 MiB): a response a slow reader cannot take at once
#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <sluice/sluice.h>

#include "../common/app_main.h"

namespace {

constexpr int max_delay_ms = 600'000;
constexpr int max_bytes = 1 << 20;

// ?name=N as an integer in [0, max]; nullopt (→ 400) when missing or malformed.
std::optional<int> bounded_param(const sluice::request& req, std::string_view name, int max) {
    auto v = req.query_param(name);
    if (!v) {
        return std::nullopt;
    }
    int n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || end != v->data() + v->size() || n < 0 || n > max) {
        return std::nullopt;
    }
    return n;
}

std::optional<int> delay_ms(const sluice::request& req) {
    return bounded_param(req, "ms", max_delay_ms);
}

void bad_delay(sluice::exchange& ex) {
    ex.response().status(400).text("expected ?ms=N with 0 <= N <= 600000\n");
}

void add_routes(sluice::server& srv) {
    srv.get("/", [](sluice::exchange& ex) { ex.response().text("Hello, World!"); });

    srv.get("/json", [](sluice::exchange& ex) { ex.response().json(R"({"message":"Hello, World!"})"); });

    srv.post("/echo", [](sluice::exchange& ex) {
        const auto& req = ex.request();
        auto& res = ex.response();
        res.content_type(req.header("Content-Type").value_or("application/octet-stream"));
        res.body(std::string(req.body()));
    });

    // "complete" style: the timer's callback finishes the response.
    srv.get("/delay", [](sluice::exchange& ex) {
        auto ms = delay_ms(ex.request());
        if (!ms) {
            return bad_delay(ex);
        }
        auto ctx = ex.start_async();
        ex.executor().post_after(std::chrono::milliseconds(*ms), [ctx, ms = *ms]() mutable {
            ctx.complete(sluice::response(200).text("delayed " + std::to_string(ms) + " ms\n"));
        });
    });

    // "resume" style: the timer resumes, the handler runs again and writes the response.
    srv.get("/delay-resume", [](sluice::exchange& ex) {
        if (ex.is_resumed()) {
            ex.response().text("resumed after " + std::to_string(ex.attribute<int>("ms").value_or(-1)) +
                               " ms\n");
            return;
        }
        auto ms = delay_ms(ex.request());
        if (!ms) {
            return bad_delay(ex);
        }
        auto ctx = ex.start_async();
        ex.executor().post_after(std::chrono::milliseconds(*ms), [ctx, ms = *ms]() mutable {
            ctx.set_attribute("ms", ms);
            ctx.resume();
        });
    });

    // Coroutine style: the exchange is suspended while the coroutine waits on the loop timer.
    srv.get("/co", [](sluice::exchange& ex) -> sluice::task<> {
        auto ms = delay_ms(ex.request());
        if (!ms) {
            bad_delay(ex);
            co_return;
        }
        if (auto ec = co_await sluice::sleep_for(ex, std::chrono::milliseconds(*ms))) {
            co_return; // cancelled: the client left or the async timeout fired; nothing is sent
        }
        ex.response().text("co_awaited " + std::to_string(*ms) + " ms\n");
    });

    // A sync handler that blocks: on an inline reactor it stalls the loop (the watchdog says so).
    srv.get("/sleep", [](sluice::exchange& ex) {
        auto ms = delay_ms(ex.request());
        if (!ms) {
            return bad_delay(ex);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(*ms));
        ex.response().text("slept " + std::to_string(*ms) + " ms\n");
    });

    // The slow-read target of benchmarks/scenarios/hostile.sh (hello's other answers fit in any
    // socket buffer, so a slow reader would never hold a send).
    srv.get("/bytes", [](sluice::exchange& ex) {
        auto n = bounded_param(ex.request(), "n", max_bytes);
        if (!n) {
            ex.response().status(400).text("expected ?n=N with 0 <= N <= 1048576\n");
            return;
        }
        ex.response().text(std::string(static_cast<std::size_t>(*n), 'x'));
    });
}

} // namespace

int main(int argc, char** argv) {
    return apps::run_app("sluice-hello", [&] {
        auto cl = sluice::parse_command_line(
            argc, argv, sluice::process_environment(), {},
            "sluice-hello: hello world, echo, delay (async, coroutine) and sleep (sync) "
            "endpoints");
        if (cl.help) {
            std::fputs(cl.usage.c_str(), stdout);
            return 0;
        }
        sluice::server srv(cl.cfg);
        add_routes(srv);
        srv.run_until_signal();
        return 0;
    });
}
