// One upstream call in four styles, side by side: what each costs is in docs/gateway.md.
//
//   sync    the handler blocks in the client call (Tomcat 6 + Apache HttpClient): one thread
//           per request in flight, so run it with --backend blocking and enough threads
//   async   suspend, the callback completes the exchange (Jetty's complete style, Netty)
//   resume  suspend, the callback resumes the handler, which writes the result (Jetty's resume)
//   co      a coroutine: co_await the head, then each piece of the body, write it, co_await
//           the downstream drain
//
// In the three asynchronous styles no thread waits for the upstream: the exchange is
// suspended and the call is a few hundred bytes of state on the loop. When the exchange ends
// first (client gone, async timeout, stop) the call is cancelled and its connection closed.
//
// async, resume and co stream the upstream body with backpressure (bounded memory whatever the
// size): async and resume through relay.h's callbacks and mutex, co in a plain loop over
// client::stream and sluice::drained (the coroutine holds one piece; the client pauses the
// upstream while the coroutine waits for the drain). sync buffers the body whole
// (max_response_bytes): its thread waits anyway (docs/gateway.md).
#include <algorithm>
#include <chrono>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/forwarding.h>

#include "gateway.h"
#include "relay.h"

namespace gateway {
namespace {

using sluice::client_response;
using sluice::exchange;
using sluice::result;

sluice::handler sync_style(gateway& g, std::string path) {
    return [&g, path](exchange& ex) {
        if (refused(ex)) {
            return;
        }
        ex.response() = downstream_response(
            g.api.send_blocking(upstream_request(ex, path, body_hold::borrow)), ex.request().method());
    };
}

sluice::handler async_style(gateway& g, std::string path) {
    return [&g, path](exchange& ex) {
        if (ex.is_resumed()) {
            relay::on_resumed(ex); // a streamed body: write the next pieces
            return;
        }
        if (refused(ex)) {
            return;
        }
        // The callbacks of the streamed call complete the exchange; a response that is whole
        // before its head went out is sent by complete() from the callback (relay.h).
        relay::start(g, ex, upstream_request(ex, path, body_hold::take),
                     relay_finish::complete_from_callback);
    };
}

sluice::handler resume_style(gateway& g, std::string path) {
    return [&g, path](exchange& ex) {
        if (ex.is_resumed()) {
            relay::on_resumed(ex); // the head, the next pieces of the body, or the end
            return;
        }
        if (refused(ex)) {
            return;
        }
        relay::start(g, ex, upstream_request(ex, path, body_hold::take), relay_finish::resume);
    };
}

sluice::handler co_style(gateway& g, std::string path) {
    return sluice::coroutine_handler([&g, path](exchange& ex) -> sluice::task<> {
        if (refused(ex)) {
            co_return;
        }
        // The coroutine's suspension waits for the call as relay::start's does, with no
        // deadline of its own (suspend_for_upstream, gateway.h).
        (void)ex.context().set_timeout(std::chrono::milliseconds(0));
        // Cancelled with the exchange (the async_op contract): the result is then not sent.
        result<sluice::client_body_stream> s =
            co_await g.api.stream(ex.executor(), upstream_request(ex, path, body_hold::take));
        if (!s) {
            ex.response() = downstream_response(result<client_response>(s.error()));
            co_return;
        }
        // With the upstream's length, if any (for HEAD: none declared when it has none).
        sluice::copy_response(s->head(), ex.response(), ex.request().method());
        bool head_out = false;
        while (auto piece = co_await s->next()) {
            ex.response().write(*piece);
            if (co_await sluice::drained(ex)) {
                co_return; // the exchange ended: leaving destroys s, which cancels the upstream call
            }
            head_out = true;
        }
        if (!s->error() || s->error() == std::errc::operation_canceled) {
            co_return; // the whole body went out (the stream ends), or the exchange has ended
        }
        if (!head_out) {
            ex.response() = downstream_response(result<client_response>(s->error()));
            co_return;
        }
        // The head went out and the body was cut upstream: the downstream client must see a cut
        // stream, not a clean end. A coroutine that throws after the head went out does that.
        throw std::runtime_error("upstream body cut: " + s->error().message());
    });
}

struct endpoint {
    const char* method;
    const char* path; // below /api/{style}, and on the upstream; its name without the '/'
};
constexpr endpoint endpoints[] = {
    {"GET", "/work"}, {"GET", "/files"}, {"POST", "/upload"}, {"GET", "/bytes"}};

bool is_limited(const gateway& g, const endpoint& e) {
    if (!g.limit) {
        return false;
    }
    const std::string_view name = std::string_view(e.path).substr(1);
    return g.limited_endpoints.empty() || std::find(g.limited_endpoints.begin(), g.limited_endpoints.end(),
                                                    name) != g.limited_endpoints.end();
}

} // namespace

std::vector<std::string> parse_endpoints(std::string_view list) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = list.find(',', start);
        const std::string_view item =
            list.substr(start, comma == std::string_view::npos ? comma : comma - start);
        const bool known = std::any_of(std::begin(endpoints), std::end(endpoints), [&](const endpoint& e) {
            return std::string_view(e.path).substr(1) == item;
        });
        if (!known) {
            throw std::invalid_argument(
                "\"" + std::string(item) +
                "\" is not an endpoint (expected a comma-separated list of work, files, "
                "upload, bytes)");
        }
        out.emplace_back(item);
        if (comma == std::string_view::npos) {
            return out;
        }
        start = comma + 1;
    }
}

std::vector<route> routes(gateway& g) {
    std::vector<route> out;
    struct style {
        const char* name;
        sluice::handler (*make)(gateway&, std::string);
    };
    static constexpr style styles[] = {
        {"sync", &sync_style}, {"async", &async_style}, {"resume", &resume_style}, {"co", &co_style}};
    for (const style& s : styles) {
        for (const endpoint& e : endpoints) {
            sluice::handler h = s.make(g, e.path);
            if (is_limited(g, e)) {
                h = sluice::limited(*g.limit, std::move(h));
            }
            out.push_back({e.method, std::string("/api/") + s.name + e.path, std::move(h)});
        }
    }
    return out;
}

void add_routes(sluice::server& srv, gateway& g) {
    for (route& r : routes(g)) {
        srv.route(r.method, r.path, std::move(r.h));
    }
}

} // namespace gateway
