// sluice-fastio: framework cost vs waiting cost (SCENARIOS.md S2).
//
//   GET /fast          a ~60-byte JSON at once
//   GET /io            the same after a 20 ms loop timer (suspended: no thread waits)
//   GET /io-blocking   the same after the handler sleeps 20 ms on its thread: with
//                      dispatch = inline this stalls the loop, and the watchdog names the route
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <sluice/sluice.h>

#include "../common/app_main.h"

namespace {

constexpr std::chrono::milliseconds io_wait{20};

// ~60 bytes, the same for every route so that only the waiting differs.
constexpr const char* payload = R"({"message":"Hello, World!","service":"sluice-fastio","ok":1})";

void add_routes(sluice::server& srv) {
    srv.get("/fast", [](sluice::exchange& ex) { ex.response().json(payload); });

    srv.get("/io", [](sluice::exchange& ex) {
        auto ctx = ex.start_async();
        ex.executor().post_after(io_wait,
                                 [ctx]() mutable { ctx.complete(sluice::response(200).json(payload)); });
    });

    srv.get("/io-blocking", [](sluice::exchange& ex) {
        std::this_thread::sleep_for(io_wait);
        ex.response().json(payload);
    });
}

} // namespace

int main(int argc, char** argv) {
    return apps::run_app("sluice-fastio", [&] {
        auto cl = sluice::parse_command_line(argc, argv, sluice::process_environment(), {},
                                             "sluice-fastio: /fast (at once), /io (20 ms loop timer), "
                                             "/io-blocking (20 ms sleep on the handler's thread)");
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
