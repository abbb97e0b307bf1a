// Fuzz target: the server's HTTP/1.1 engine end to end, without sockets. The real loop and
// connection (server_session for parsing, the serializer for the answers) run over an
// in-memory driver; the client's bytes come from the input, pipelined and split at points
// the input chooses; a handler answers each request in a way the input chooses (fixed body,
// stream, 204/304 with a body set, any status, framing headers the server must drop,
// Connection: close, async complete, async resume). Then an independent strict reader
// (llhttp in response mode) reads what the server wrote, and any of these aborts:
// - the output is not a sequence of well-framed responses, or ends inside one;
// - a response is out of order: the i-th final response does not answer the i-th request
//   (X-Seq names the handler call, the handler checks which request it got), or a body
//   is not the one the handler wrote (HEAD, 1xx, 204 and 304: none);
// - a 1xx other than "100 Continue" for an Expect request, or a handler's 1xx sent as final;
// - a response that announces the end of the connection is followed by another, or the
//   connection stops answering without announcing it;
// - a handler's response never sent, the connection not closed, an exchange not freed.
// The reference for "the i-th request" is a second server_session fed the whole input at
// once, so a split that changes what is parsed is caught as well.
//
// Input: 16 control bytes, then the client's bytes.
//   [0] limits: bits 0-1 max_header_bytes, 2-3 max_body_bytes, 4-5 max_keepalive_requests
//   [1] send limit per send() (0 = no limit)
//   [2..7] receive piece sizes, cycled (0 = all that is left)
//   [8..15] per handler call, cycled: low nibble = kind of answer, high nibble = parameter
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/sluice.h>

#include "http/server_session.h"
#include "loop/loop.h"
#include "response_reader.h"
#include "server/listener.h"
#include "server/loop_context.h"
#include "server/server_context.h"
#include "split_driver.h"

namespace sluice::fuzz {
namespace {

constexpr std::size_t control_bytes = 16;

struct expected_request {
    std::string method, target, path, body;
    http_version version;
    bool keep_alive = true;
    bool expects_continue = false;
};

struct reference {
    std::vector<expected_request> requests;
    int error_status = 0;               ///< the session failed after the last complete request
    bool tail_expects_continue = false; ///< the request after them (partial or failed) did
    bool tail_is_head = false;          ///< ... and was a HEAD: its error has no body
};

expected_request snapshot(const request& r) {
    // The session honours "Expect: 100-continue" in any Expect header line, not only the first.
    bool expects_continue = false;
    for (const auto h : r.headers()) {
        expects_continue =
            expects_continue || (iequals(h.name, "expect") && iequals(h.value, "100-continue"));
    }
    return {std::string(r.method()),
            std::string(r.target()),
            std::string(r.path()),
            std::string(r.body()),
            r.version(),
            r.keep_alive(),
            expects_continue};
}

reference parse_reference(std::string_view wire, const http::session_limits& limits) {
    http::server_session s{limits};
    request req;
    reference ref;
    std::size_t off = 0;
    for (;;) {
        const http::feed_result r = s.feed(wire.substr(off), req);
        off += r.consumed;
        if (r.status == http::feed_status::request_ready) {
            ref.requests.push_back(snapshot(req));
            req.clear();
            s.next_request();
            continue;
        }
        if (r.status == http::feed_status::failed) {
            ref.error_status = s.error_status();
        }
        const expected_request tail = snapshot(req);
        ref.tail_expects_continue = tail.expects_continue;
        ref.tail_is_head = tail.method == "HEAD";
        return ref;
    }
}

struct handled {
    expected_request request;
    int status = 200;
    std::string body;
};

struct harness {
    std::string_view input;
    std::string_view kinds;
    std::vector<handled> calls;
};

harness* current = nullptr; // the handlers are registered once; they reach the run through this

// Control characters escaped, so that a report shows CR, LF and the control bytes.
std::string printable(std::string_view s) {
    std::string out;
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n') {
            out += "\\n\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (u < 0x20 || u >= 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", u);
            out += hex;
        } else {
            out += c;
        }
    }
    return out;
}

[[noreturn]] void violation(const std::string& what, std::string_view output = {}) {
    const std::string_view in = current != nullptr ? current->input : std::string_view{};
    std::fprintf(stderr, "http_server_fuzz: %s\n--- input ---\n%s\n--- output ---\n%s\n", what.c_str(),
                 printable(in.substr(0, control_bytes))
                     .append("|\n")
                     .append(printable(in.substr(std::min(in.size(), control_bytes))))
                     .c_str(),
                 printable(output).c_str());
    std::abort();
}

std::string body_for(std::size_t call, std::size_t len) {
    return std::string(len, static_cast<char>('a' + call % 26));
}

constexpr int status_table[16] = {100, 102, 103, 199, 200, 201, 205, 299,
                                  301, 404, 418, 500, 599, 600, 0,   304};

bool no_content(int status) {
    return status < 200 || status == 204 || status == 304;
}

void answer(exchange& ex) {
    harness& h = *current;
    const std::size_t call = h.calls.size();
    const auto k = static_cast<unsigned char>(h.kinds[call % h.kinds.size()]);
    const unsigned param = k >> 4U;
    handled rec{snapshot(ex.request()), 200, {}};
    response& res = ex.response();
    const std::string seq = std::to_string(call);
    if (ex.is_resumed()) {
        const std::size_t first = ex.attribute<std::size_t>("seq").value_or(0);
        res.header("X-Seq", std::to_string(first)).text(h.calls.at(first).body);
        return; // recorded by the first dispatch
    }
    switch (k & 0x0fU) {
    case 1: // a stream of a few writes, empty ones included
    case 4: // a stream with a status that has no content
    case 5:
    case 7: {
        rec.status = (k & 0x0fU) == 1   ? 200
                     : (k & 0x0fU) == 4 ? 204
                     : (k & 0x0fU) == 5 ? 304
                                        : status_table[param];
        res.status(rec.status).header("X-Seq", seq);
        for (unsigned i = 0; i < param % 4 + 1; ++i) {
            const std::string part = body_for(call, (param + i) % 5);
            res.write(part);
            rec.body += part;
        }
        break;
    }
    case 2:
    case 3:
    case 6:
        rec.status = (k & 0x0fU) == 2 ? 204 : (k & 0x0fU) == 3 ? 304 : status_table[param];
        rec.body = body_for(call, param + 1);
        res.status(rec.status).header("X-Seq", seq).text(rec.body);
        break;
    case 8: // framing headers of the handler's own: the server owns framing and drops them
        rec.body = body_for(call, param);
        res.header("X-Seq", seq).header("Content-Length", "999").header("Transfer-Encoding", "chunked");
        res.header("Connection", "keep-alive").text(rec.body);
        break;
    case 9:
        rec.body = body_for(call, param);
        res.header("X-Seq", seq).header("Connection", "close").text(rec.body);
        break;
    case 10: { // async: completed from a posted task
        rec.body = body_for(call, param);
        auto ctx = ex.start_async();
        ex.executor().post([ctx, seq, body = rec.body]() mutable {
            ctx.complete(response(200).header("X-Seq", seq).text(body));
        });
        break;
    }
    case 11: { // async: resumed from a posted task, answered by the second dispatch
        rec.body = body_for(call, param);
        ex.set_attribute("seq", call);
        auto ctx = ex.start_async();
        ex.executor().post([ctx]() mutable { ctx.resume(); });
        break;
    }
    default:
        rec.body = body_for(call, std::size_t{param} * 5);
        res.header("X-Seq", seq).text(rec.body);
        break;
    }
    h.calls.push_back(std::move(rec));
}

const router& routes() {
    static const router r = [] {
        router rt;
        // Every method llhttp parses (CONNECT never reaches the router: 501).
        const std::vector<std::string_view> methods = {
#define SLUICE_FUZZ_METHOD(num, name, text) #text,
            HTTP_METHOD_MAP(SLUICE_FUZZ_METHOD)
#undef SLUICE_FUZZ_METHOD
        };
        for (const std::string_view name : methods) {
            try {
                rt.add(name, "/{rest...}", answer);
            } catch (const std::invalid_argument&) {
                // a name the router does not take as a method token
            }
        }
        return rt;
    }();
    return r;
}

bool same_request(const expected_request& a, const expected_request& b) {
    return a.method == b.method && a.target == b.target && a.body == b.body && a.version == b.version;
}

// Whether a client would take this response as the last on the connection.
bool announces_close(const read_response& r, const expected_request* req) {
    if (!r.keep_alive) {
        return true;
    }
    if (req != nullptr && req->version == http_version{1, 0}) {
        for (const std::string_view v : r.values("connection")) {
            if (iequals(v, "keep-alive")) {
                return false;
            }
        }
        return true;
    }
    return false;
}

void check_output(const harness& h, const reference& ref, const std::string& out) {
    const auto& reqs = ref.requests;
    std::vector<read_response> got;
    const auto is_head = [&](std::size_t i) {
        return i < reqs.size() ? reqs[i].method == "HEAD" : i == reqs.size() && ref.tail_is_head;
    };
    if (const std::string err = read_responses(out, is_head, got); !err.empty()) {
        violation("unreadable output: " + err, out);
    }
    std::size_t finals = 0; // final responses so far = index of the request being answered
    std::size_t calls = 0;  // handler calls accounted for
    bool continued = false;
    std::vector<router::param> params;
    for (std::size_t n = 0; n < got.size(); ++n) {
        const read_response& r = got[n];
        const std::vector<std::string_view> seq = r.values("x-seq");
        const expected_request* req = finals < reqs.size() ? &reqs[finals] : nullptr;
        if (r.status < 200) {
            if (!seq.empty()) {
                violation("a handler's " + std::to_string(r.status) + " was sent as a final response", out);
            }
            const bool asked = req != nullptr ? req->expects_continue : ref.tail_expects_continue;
            if (r.status != 100 || !asked || continued) {
                violation("unexpected interim response " + std::to_string(r.status), out);
            }
            continued = true;
            continue;
        }
        continued = false;
        const std::string at = "response " + std::to_string(finals) + ": ";
        if (req == nullptr) {
            if (finals != reqs.size() || ref.error_status == 0 || r.status != ref.error_status) {
                violation(at + "no request to answer (status " + std::to_string(r.status) + ")", out);
            }
        } else if (!seq.empty()) {
            if (seq.size() != 1 || seq[0] != std::to_string(calls) || calls >= h.calls.size()) {
                violation(at + "out of order: X-Seq " + std::string(seq[0]) + ", expected " +
                              std::to_string(calls),
                          out);
            }
            const handled& c = h.calls[calls];
            if (!same_request(c.request, *req)) {
                violation(at + "the handler saw " + c.request.method + " " + c.request.target +
                              ", the reference parse " + req->method + " " + req->target,
                          out);
            }
            // out of range, or a 1xx as the answer (101 too: Upgrade is never honoured): 500
            const bool bad = c.status < 200 || c.status > 599;
            const int sent = bad ? 500 : c.status;
            if (r.status != sent) {
                violation(at + "status " + std::to_string(r.status) + ", handler set " +
                              std::to_string(c.status),
                          out);
            }
            const bool bodyless = req->method == "HEAD" || no_content(sent);
            if (r.body != (bodyless ? std::string() : c.body)) {
                violation(at + "body is not the handler's", out);
            }
            ++calls;
        } else if (req->target == "*") {
            // "OPTIONS *" (the session refuses "*" with any other method): the server answers.
            const auto allow = r.values("allow");
            if (r.status != 200 || !r.body.empty() || allow.size() != 1 || allow[0] != routes().methods()) {
                violation(at + "OPTIONS * answered " + std::to_string(r.status) +
                              ", not 200 with the routed methods",
                          out);
            }
        } else {
            // The router answered (404, 405), or a path escape was malformed (400).
            const router::match_result m = routes().match(req->method, req->path, params);
            if (r.status != (m.status != 0 ? m.status : 400)) {
                violation(at + "unexpected status " + std::to_string(r.status) + " without X-Seq", out);
            }
        }
        if (n + 1 < got.size() && announces_close(r, req)) {
            violation(at + "announces the end of the connection, yet more follows", out);
        }
        ++finals;
    }
    if (calls != h.calls.size()) {
        violation(std::to_string(h.calls.size() - calls) + " handler responses never sent", out);
    }
    const std::size_t owed = reqs.size() + (ref.error_status != 0 ? 1 : 0);
    if (finals < owed) {
        const bool announced =
            !got.empty() &&
            announces_close(got.back(), finals - 1 < reqs.size() ? &reqs[finals - 1] : nullptr);
        if (!announced) {
            violation(std::to_string(owed - finals) +
                          " requests unanswered on a connection that did not announce its end",
                      out);
        }
    }
}

http::session_limits limit_choice(unsigned bits, config& cfg) {
    static constexpr std::size_t header_limits[4] = {8192, 256, 300, 1024};
    static constexpr std::size_t body_limits[4] = {std::size_t{1} << 20, 0, 5, 100};
    static constexpr std::uint32_t keepalive[4] = {0, 0, 1, 3};
    cfg.limits.max_header_bytes = header_limits[bits & 3U];
    cfg.limits.max_body_bytes = body_limits[(bits >> 2U) & 3U];
    cfg.limits.max_keepalive_requests = keepalive[(bits >> 4U) & 3U];
    return {cfg.limits.max_header_bytes, cfg.limits.max_body_bytes};
}

void run_one(std::string_view input) {
    if (input.size() < control_bytes) {
        return;
    }
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(input[i]); };
    const std::string_view wire = input.substr(control_bytes);
    harness h{input, input.substr(8, 8), {}};
    current = &h;

    config cfg;
    cfg.watchdog_ms = 0;
    const http::session_limits limits = limit_choice(byte(0), cfg);
    const reference ref = parse_reference(wire, limits);

    const logger log{log_level::error, [](log_level, std::string_view) {}};
    detail::server_context server_ctx{cfg, routes(), log};
    auto drv = std::make_unique<split_driver>();
    split_driver& d = *drv;
    d.inner.send_limit = byte(1) == 0 ? static_cast<std::size_t>(-1) : byte(1);
    for (std::size_t i = 2; i < 8; ++i) {
        d.pieces.push_back(byte(i));
    }
    d.inner.peers[split_driver::fd].inbound = std::string(wire);
    std::string out;
    {
        detail::loop loop{std::move(drv), log, 0};
        detail::loop_context lc{loop, server_ctx};
        detail::adopt_connection(lc, split_driver::fd, detail::listener_kind::plain);
        loop.run(detail::loop::run_mode::until_idle);
        out = d.inner.peers[split_driver::fd].outbound;
        if (!d.inner.peers[split_driver::fd].closed) {
            violation("the connection was never closed", out);
        }
        if (lc.counters.exchanges_live.load() != 0 || lc.counters.open.load() != 0 ||
            lc.counters.suspended.load() != 0) {
            violation("an exchange or the connection was not freed", out);
        }
    }
    check_output(h, ref, out);
    current = nullptr;
}

} // namespace
} // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    sluice::fuzz::run_one({reinterpret_cast<const char*>(data), size});
    return 0;
}
