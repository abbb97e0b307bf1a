#include "options.h"

#include <fmt/core.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace connhold {

namespace {

// An empty `what` is --help: the usage on stdout, exit 0.
[[noreturn]] void usage_error(const std::string& what) {
    std::fprintf(
        what.empty() ? stdout : stderr,
        "%s"
        "usage: sluice-connhold --port P [--host 127.0.0.1] [--connections N] [--window W]\n"
        "         [--request 'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'] [--wait connected|sent|answered]\n"
        "         [--wait-timeout-ms MS] [--hold-ms MS] [--hold-stdin] [--connect-timeout-ms MS]\n"
        "         [--deadline-ms MS] [--close rst|fin]\n",
        what.empty() ? "" : ("sluice-connhold: " + what + "\n").c_str());
    std::exit(what.empty() ? 0 : 2);
}

// The request is usually given in shell single quotes, so \r \n \t \\ arrive as two characters.
std::string unescape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 == s.size()) {
            out += s[i];
            continue;
        }
        char c = s[++i];
        out += c == 'r' ? '\r' : c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    return out;
}

long to_long(const std::string& flag, const char* v) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0) {
        usage_error("bad value for " + flag + ": " + v);
    }
    return n;
}

} // namespace

options parse_options(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        if (flag == "--help" || flag == "-h") {
            usage_error("");
        }
        if (flag == "--hold-stdin") {
            o.hold_stdin = true;
            continue;
        }
        if (i + 1 >= argc) {
            usage_error("missing value for " + flag);
        }
        const char* v = argv[++i];
        if (flag == "--host") {
            o.host = v;
        } else if (flag == "--port") {
            o.port = static_cast<int>(to_long(flag, v));
        } else if (flag == "--connections") {
            o.connections = static_cast<std::size_t>(to_long(flag, v));
        } else if (flag == "--window") {
            o.window = std::max<std::size_t>(1, static_cast<std::size_t>(to_long(flag, v)));
        } else if (flag == "--request") {
            o.request = unescape(v);
        } else if (flag == "--wait") {
            std::string_view w = v;
            o.wait = w == "sent"       ? wait_for::sent
                     : w == "answered" ? wait_for::answered
                                       : wait_for::connected;
            if (w != "sent" && w != "answered" && w != "connected") {
                usage_error("bad --wait: " + std::string(w));
            }
        } else if (flag == "--wait-timeout-ms") {
            o.wait_timeout_ms = to_long(flag, v);
        } else if (flag == "--hold-ms") {
            o.hold_ms = to_long(flag, v);
        } else if (flag == "--connect-timeout-ms") {
            o.connect_timeout_ms = to_long(flag, v);
        } else if (flag == "--deadline-ms") {
            o.deadline_ms = to_long(flag, v);
        } else if (flag == "--close") {
            o.close_rst = std::string_view(v) == "rst";
        } else {
            usage_error("unknown flag " + flag);
        }
    }
    if (o.port <= 0 || o.port > 65535) {
        usage_error("--port is required (1..65535)");
    }
    if (o.request.empty() && o.wait != wait_for::connected) {
        usage_error("--wait sent|answered needs --request");
    }
    return o;
}

// One fd per connection, plus a few of our own: fail early rather than at connection 19,990.
void raise_fd_limit(std::size_t needed) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && needed + 16 > rl.rlim_cur) {
        usage_error(fmt::format("{} connections need more than the open-file limit {}", needed, rl.rlim_cur));
    }
}

} // namespace connhold
