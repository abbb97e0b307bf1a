// One upstream call in four styles, side by side: what each costs is in docs/gateway.md.
//
//   sync    the handler blocks in the client call (Tomcat 6 + Apache HttpClient): one thread
//           per request in flight, so run it with --backend blocking and enough threads
//   async   suspend, the callback completes the exchange (Jetty's complete style, Netty)
//   resume  suspend, the callback resumes the handler, which writes the result (Jetty's resume)
//   co      a coroutine: co_await the call, then write the result
//
// In the three asynchronous styles no thread waits for the upstream: the exchange is
// suspended and the call is a few hundred bytes of state on the loop. When the exchange ends
// first (client gone, async timeout, stop) the call is cancelled and its connection closed.
#include <memory>
#include <string>

#include "gateway.h"

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
        const result<client_response> r = g.api.send_blocking(upstream_request(ex, path, body_hold::borrow));
        ex.response() = downstream_response(r);
    };
}

sluice::handler async_style(gateway& g, std::string path) {
    return [&g, path](exchange& ex) {
        if (refused(ex)) {
            return;
        }
        auto ctx = ex.start_async();
        const sluice::client_call call =
            g.api.send(ex.executor(), upstream_request(ex, path, body_hold::copy),
                       [ctx](result<client_response> r) mutable { ctx.complete(downstream_response(r)); });
        ctx.on_complete([call](const sluice::async_event&) { call.cancel(); }); // no-op once answered
    };
}

sluice::handler resume_style(gateway& g, std::string path) {
    using upstream_result = std::shared_ptr<result<client_response>>; // std::any needs a copyable type
    return [&g, path](exchange& ex) {
        if (ex.is_resumed()) {
            if (auto r = ex.attribute<upstream_result>("gateway.upstream")) {
                ex.response() = downstream_response(**r);
            }
            return;
        }
        if (refused(ex)) {
            return;
        }
        auto ctx = ex.start_async();
        const sluice::client_call call =
            g.api.send(ex.executor(), upstream_request(ex, path, body_hold::copy),
                       [ctx](result<client_response> r) mutable {
                           ctx.set_attribute("gateway.upstream",
                                             std::make_shared<result<client_response>>(std::move(r)));
                           ctx.resume();
                       });
        ctx.on_complete([call](const sluice::async_event&) { call.cancel(); });
    };
}

sluice::handler co_style(gateway& g, std::string path) {
    return sluice::coroutine_handler([&g, path](exchange& ex) -> sluice::task<> {
        if (refused(ex)) {
            co_return;
        }
        // Cancelled with the exchange (the async_op contract): the result is then not sent.
        const result<client_response> r =
            co_await g.api.async_send(ex.executor(), upstream_request(ex, path, body_hold::copy));
        ex.response() = downstream_response(r);
    });
}

} // namespace

void add_routes(sluice::server& srv, gateway& g) {
    struct style {
        const char* name;
        sluice::handler (*make)(gateway&, std::string);
    };
    static constexpr style styles[] = {
        {"sync", &sync_style}, {"async", &async_style}, {"resume", &resume_style}, {"co", &co_style}};
    struct endpoint {
        const char* method;
        const char* path; // below /api/{style}, and on the upstream
    };
    static constexpr endpoint endpoints[] = {
        {"GET", "/work"}, {"GET", "/files"}, {"POST", "/upload"}, {"GET", "/bytes"}};
    for (const style& s : styles) {
        for (const endpoint& e : endpoints) {
            sluice::handler h = s.make(g, e.path);
            if (g.limit) {
                h = sluice::limited(*g.limit, std::move(h));
            }
            srv.route(e.method, std::string("/api/") + s.name + e.path, std::move(h));
        }
    }
}

} // namespace gateway
