// sluice-load: a closed-loop HTTP/1.1 load generator on sluice::client (see runner.h).
#include <fmt/format.h>
#include <sys/resource.h>

#include <iostream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "options.h"
#include "report.h"
#include "request.h"
#include "runner.h"

int main(int argc, char** argv) {
    using namespace sluice::load;
    std::vector<std::string_view> args(argv + 1, argv + argc);
    for (auto a : args) {
        if (a == "-h" || a == "--help") {
            std::cout << usage_text;
            return 0;
        }
    }
    try {
        const load_options o = parse_options(args);
        rlimit lim{};
        // One fd per user plus a few of the client's own (its loop, eventfds, stdio).
        if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < o.users + 32) {
            std::cerr << fmt::format(
                "sluice-load: {} users need more than {} fds (ulimit -n is {}); raise it\n", o.users,
                o.users + 32, lim.rlim_cur);
            return 2;
        }
        const sluice::client_request request = build_request(o);
        auto r = run(o, request, o.progress ? &std::cerr : nullptr);
        double w0 = o.window_start_s >= 0 ? o.window_start_s : o.ramp_up_s + 1;
        double w1 = o.window_end_s >= 0 ? o.window_end_s : r.elapsed_s - 1;
        if (w1 <= w0) {
            w0 = 0; // too short a run for a window apart from ramp-up and end: the whole run
            w1 = r.elapsed_s;
        }
        auto s = summarize(r.samples, r.elapsed_s, w0, w1, r.bytes_received, r.bytes_sent);
        print_report(std::cout, s, o);
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "sluice-load: " << e.what() << "\n" << usage_text;
        return 2;
    }
}
