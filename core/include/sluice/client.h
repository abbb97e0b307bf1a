// sluice::client: an HTTP/1.1 client for one upstream service, on the server's own loops.
//
//   sluice::client api(sluice::upstream({"10.0.0.5:8080", "10.0.0.6:8080"}), {.max_connections = 100});
//
//   // callback style: `done` runs on ex's loop
//   api.send(ex.executor(), {.method = "GET", .target = "/work"},
//   [ctx](sluice::result<sluice::client_response> r) {...});
//   // coroutine style (the request named, not braced inside co_await: GCC 12, client_stream.h)
//   sluice::client_request files{.target = "/files"};
//   sluice::result<sluice::client_response> r = co_await api.async_send(ex.executor(), std::move(files));
//   // blocking style (sync handlers; on an inline reactor loop this stalls the loop)
//   sluice::result<sluice::client_response> r = api.send_blocking({.target = "/files"});
//   // streaming: the head, then the body piece by piece, with backpressure (pause_body)
//   sluice::client_call c = api.send_streaming(ex.executor(), {.target = "/bytes?n=1000000"},
//       {.on_head = ..., .on_body = [](std::string_view piece) {...}, .on_end = [](std::error_code) {...}});
//   // streaming in a coroutine: the same, awaited (client_stream.h)
//   sluice::result<sluice::client_body_stream> s = co_await api.stream(ex.executor(), std::move(req));
//   while (auto piece = co_await s->next()) {...}
//
// One implementation under the three styles (docs/client.md):
// - A call runs on a reactor loop: the executor's own loop when it is a reactor loop (epoll,
//   uring), otherwise (the blocking backend, an empty executor, send_blocking) on ONE reactor
//   loop thread that the client starts on first need (the first of uring, epoll that runs
//   here). Never a thread per call.
// - Each loop keeps its own keep-alive pool for this upstream (max_connections is per loop).
// - Every failure is a distinct client_errc; a call completes exactly once.
// - Retry rule: a call is retried once, at once, on a fresh connection only when its
//   connection came from the pool, no byte of a response arrived, and the method is idempotent
//   (RFC 9110 §9.2.2) or nothing of the request was written. Never a POST whose body went out.
// - Hop-by-hop headers (Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-*, Transfer-Encoding,
//   and those named in Connection) in a client_request are never sent; the client writes its
//   own Host (unless the request has one: the authority of the address it goes to) and
//   Content-Length (when there is a body, and for POST, PUT and PATCH). It writes no Connection
//   header: an HTTP/1.1 connection stays open without one (RFC 9112 §9.3), and the client
//   never asks the upstream to close.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sluice/async_op.h>
#include <sluice/config.h>
#include <sluice/executor.h>
#include <sluice/result.h>

namespace sluice {

namespace detail {
class client_core;
class client_call_state;
class upstream_state;
} // namespace detail

class client_body_stream; // client_stream.h

/// Why a client call failed. Each is distinct, so a gateway can answer 502 or 504.
enum class client_errc {
    refused = 1,          ///< every address tried refused the connection (or is marked failed)
    connect_timed_out,    ///< connect() did not finish within connect_timeout
    response_timed_out,   ///< the response did not complete within response_timeout
    pool_exhausted,       ///< max_connections busy and max_pending calls wait already
    acquire_timed_out,    ///< waited acquire_timeout for a connection of the pool
    reset,                ///< the upstream closed or reset the connection before the response ended
    malformed_response,   ///< the response broke HTTP/1.1 (bad syntax, HTTP/0.9, conflicting framing)
    response_too_large,   ///< the response exceeded max_response_bytes, or its head max_response_head_bytes
    cancelled,            ///< cancel(), the client's destruction, or the loop stopped
    invalid_request,      ///< the request cannot be sent safely (CR/LF/NUL in a field, bad method/target)
    tls_handshake_failed, ///< an https upstream's TLS handshake failed (not TLS, no common version or suite)
    tls_certificate_rejected, ///< an https upstream's certificate failed verification (the log says why)
};

/// How many client_errc values there are: they run from 1 to client_errc_count. A new error
/// goes last and moves this to it (a test checks that client_errc_name() knows no value beyond).
inline constexpr std::size_t client_errc_count =
    static_cast<std::size_t>(client_errc::tls_certificate_rejected);

/// The enumerator's name ("connect_timed_out"): snake_case and stable, the `kind` label of
/// /metrics. "" for a value that is not a client_errc.
std::string_view client_errc_name(client_errc e) noexcept;

const std::error_category& client_category() noexcept;

inline std::error_code make_error_code(client_errc e) noexcept {
    return {static_cast<int>(e), client_category()};
}

/// Whether an https upstream's certificate is checked.
enum class tls_verify {
    peer, ///< chain to a trusted CA, validity dates, and the name (the default)
    none, ///< nothing is checked: anyone on the path can read and change the traffic (a warning is logged)
};

/// TLS to https:// upstreams (docs/tls.md, "Client"). Unused for plaintext addresses.
struct client_tls_options {
    /// PEM file of the CAs to trust instead of the system's bundle; "" = the system's
    /// (OpenSSL's default paths).
    std::string ca_file{};
    tls_verify verify = tls_verify::peer;
    /// The name sent as SNI and checked against the certificate; "" = each address's host.
    std::string server_name{};
    /// PEM certificate chain (leaf first) offered to an upstream that asks for a client
    /// certificate (mutual TLS); "" = none. Set with key_file.
    std::string cert_file{};
    /// PEM private key of cert_file, unencrypted.
    std::string key_file{};
};

struct client_options {
    /// Connections of one loop's pool (busy + idle) to this upstream.
    std::size_t max_connections = 100;
    /// Calls of one loop that wait for a connection; one more fails at once with pool_exhausted.
    std::size_t max_pending = 1000;
    /// The longest a call waits for a pool connection (acquire_timed_out).
    std::chrono::milliseconds acquire_timeout{5000};
    /// The longest one connect() may take (connect_timed_out; the address is then skipped).
    std::chrono::milliseconds connect_timeout{2000};
    /// From the first byte of the request written to the last byte of the response.
    std::chrono::milliseconds response_timeout{30000};
    /// A pooled idle connection is closed after this long (under the usual 60 s of upstreams).
    std::chrono::milliseconds idle_timeout{50000};
    /// Requests one connection serves before it is closed; 0 = unlimited.
    std::uint64_t max_requests_per_connection = 0;
    /// A connection older than this is not reused; 0 = unlimited.
    std::chrono::milliseconds max_connection_lifetime{0};
    /// How long an address that refused or timed out is skipped (nginx fail_timeout).
    std::chrono::milliseconds fail_timeout{10000};
    /// Head plus buffered body of one response (response_too_large beyond).
    std::size_t max_response_bytes = std::size_t{64} * 1024 * 1024;
    /// The response's head, interim (1xx) responses included (response_too_large beyond; nginx
    /// says "upstream sent too big header"). The gateway passes the head on whole, so this also
    /// bounds what it sends its own clients.
    std::size_t max_response_head_bytes = std::size_t{64} * 1024;
    /// TLS settings for https:// addresses.
    client_tls_options tls{};
    /// Where the client's warnings go (a certificate rejected and why, verification off, an
    /// upstream name that no longer resolves); empty: stderr. Called from the loops the calls
    /// run on and the resolver thread, possibly several at once; never after ~client returned.
    std::function<void(log_level, std::string_view)> log{};
};

/// How an upstream's host names are looked up, at construction and again while it is used
/// (docs/client.md, "Re-resolution").
struct upstream_options {
    /// How often each host name is looked up again (nginx `resolve`, `valid=`), on a thread of
    /// the client that is not an I/O loop; the pools take the new addresses on their next
    /// connect. 0 = never (looked up once, at construction). An IP literal is never looked up
    /// again. A lookup that fails keeps the last addresses found (a warning is logged).
    std::chrono::milliseconds resolve_interval{30000};
    /// For tests and custom service discovery: the addresses of `host` (as given, no brackets)
    /// for `port` (as given, or the scheme's default), as "ip:port" / "[v6]:port" literals, in
    /// order (round robin goes over all of them). An empty vector or an exception = the lookup
    /// failed. Unset: getaddrinfo, its first result. Never called for an IP literal. Runs on
    /// the constructor's thread, then on the resolver thread of each client that uses the
    /// upstream (one lookup at a time per client: thread-safe if clients share the upstream);
    /// one lookup in progress when the client is destroyed is not waited for: it may end
    /// after ~client(), so it must not use anything that dies with the client.
    std::function<std::vector<std::string>(std::string_view host, std::uint16_t port)> resolve{};
};

/// One upstream service: one or more addresses, each "host:port", "[v6]:port", or a URL
/// without a path: "http://host[:port]" (port 80 by default) or "https://host[:port]" (TLS,
/// port 443 by default; client_options::tls). Each is its own authority: a request sent to
/// it says Host: host[:port], the port left out when it is the scheme's default.
class upstream {
public:
    /// Resolves every address now, on the calling thread (never on an I/O loop). Throws
    /// std::invalid_argument naming the address that is malformed or does not resolve, or when
    /// the list is empty. A client using it looks host names up again every
    /// options.resolve_interval (copies of an upstream share their addresses).
    explicit upstream(std::vector<std::string> addresses, upstream_options options = {});
    upstream(std::initializer_list<std::string> addresses, upstream_options options = {})
        : upstream(std::vector<std::string>(addresses), std::move(options)) {}

    /// The addresses as given.
    const std::vector<std::string>& names() const noexcept;
    /// For the library: the resolved state.
    const std::shared_ptr<detail::upstream_state>& state() const noexcept { return state_; }

private:
    std::shared_ptr<detail::upstream_state> state_;
};

/// A header field of a client request or response.
struct client_header {
    std::string name;
    std::string value;
};

struct client_request {
    std::string method = "GET";
    /// origin-form: "/path?query".
    std::string target = "/";
    /// End-to-end headers; hop-by-hop ones are dropped (see top). Host, unless given here, is
    /// the authority of the upstream address the request goes to (docs/client.md, "Upstream
    /// addresses"): give it here to name one service behind several addresses.
    std::vector<client_header> headers{};
    /// The body, owned by the request.
    std::string body{};
    /// A borrowed body (e.g. the incoming request's body, forwarded without a copy), used
    /// instead of `body` when its data() is not null. The bytes must stay valid until the
    /// callback has run, a cancelled call's too: a call that ends while its request is still
    /// being sent (an early answer, a timeout, a cancel) is answered only once that send has
    /// ended, since io_uring may read the bytes until then. A caller that cannot wait for the
    /// callback (an exchange that may end first) moves the body into `body` instead.
    std::string_view body_view{};
};

struct client_response {
    int status = 0;
    std::vector<client_header> headers{};
    std::string body{};
    /// The first header of that name (case-insensitive).
    std::optional<std::string_view> header(std::string_view name) const noexcept;
};

/// The callbacks of a streamed call (client::send_streaming). They run on the call's loop (the
/// executor's loop when it is a reactor loop, else the client's own loop), inline, in order:
/// on_head at most once, on_body zero or more times, on_end exactly once, last. They must not
/// block, and must not destroy the client.
struct client_stream_handler {
    /// The final response's status and headers (body empty; 1xx responses are skipped), moved
    /// to the handler: its to keep. Not called for a call that fails before a whole head
    /// arrived. (A callback taking `const client_response&` fits too.)
    std::function<void(client_response head)> on_head;
    /// A piece of the body, lent until return: consume or copy it. Pieces are as large as one
    /// read from the socket; client_call::pause_body() stops the next reads (pieces of a read
    /// already made may still follow, except when the pause came before the body began: then
    /// not a byte of it comes before resume_body()).
    std::function<void(std::string_view piece)> on_body;
    /// The end: an empty code when the whole response arrived (the connection may go back to
    /// the pool), else why it ended: before on_head an error as for send(); after it the body
    /// is cut (reset, malformed_response, response_timed_out, cancelled) and the connection
    /// is closed.
    std::function<void(std::error_code)> on_end;
    /// Optional: kept alive while the call may run a callback, and released with them after
    /// on_end. Callbacks that all serve one object can capture a plain pointer to it and put
    /// the object's shared_ptr here: a std::function holding a shared_ptr allocates, one
    /// holding a pointer does not.
    std::shared_ptr<void> owner{};
};

/// Whether a header must not be forwarded by a proxy, in either direction (RFC 9110 §7.6.1):
/// Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-*, Transfer-Encoding, and any name
/// listed in a Connection header of `headers` (the message it belongs to). Content-Length is
/// not among them (a gateway that re-frames a body replaces it itself). The client applies it
/// to requests; a gateway applies it to the client_response headers it passes on.
bool is_hop_by_hop_header(std::string_view name, const std::vector<client_header>& headers) noexcept;

/// A call in flight. Copies share the call; a default-constructed handle refers to none.
class client_call {
public:
    client_call() noexcept = default;
    explicit client_call(std::shared_ptr<detail::client_call_state> s) noexcept : state_(std::move(s)) {}

    /// Cancels the call: its callback runs with client_errc::cancelled, and its upstream
    /// connection is closed (a half-used connection is never pooled). Thread-safe; the work is
    /// done on the call's loop. False when the call had completed (or been cancelled) already.
    bool cancel() const noexcept;

    /// A streamed call's backpressure: stop reading the upstream's body until resume_body()
    /// (the upstream is then held by TCP flow control). Thread-safe; on the call's loop it
    /// takes effect at once (also from inside on_body), elsewhere it is posted there. Called
    /// before the head arrived (at once after send_streaming, say) or inside on_head, it holds
    /// the whole body: the head is read and on_head runs, then no on_body (not even for the
    /// rest of the read that brought the head) and no on_end until resume_body(). While
    /// paused, response_timeout does not run (the reader sets the pace; see docs/client.md);
    /// until the head it does (the upstream is slow to answer, not the reader).
    /// Neither runs a callback of the call inline, so both may be called under a lock that
    /// those callbacks take.
    void pause_body() const noexcept;
    void resume_body() const noexcept;

private:
    std::shared_ptr<detail::client_call_state> state_;
};

struct client_stats {
    std::uint64_t connects = 0;  ///< connections opened
    std::uint64_t reused = 0;    ///< calls served on a pooled connection
    std::uint64_t retried = 0;   ///< calls retried on a fresh connection (the stale keep-alive case)
    std::uint64_t completed = 0; ///< calls completed with a response
    std::uint64_t failed = 0;    ///< calls completed with an error (cancelled included)
    std::size_t open = 0;        ///< connections open now (busy + idle, every loop)
    std::size_t idle = 0;        ///< of those, idle in a pool now
    /// Calls that have no connection to send on now (every loop): queued because
    /// max_connections are busy, plus those whose new connection is being opened (connect and
    /// TLS handshake). max_pending bounds only the queued ones.
    std::size_t pending = 0;
    std::uint64_t tls_handshakes = 0; ///< TLS handshakes completed (https upstreams)
    std::uint64_t tls_resumed = 0;    ///< of those, resumed from an earlier connection's session
    /// `failed` by why: [e - 1] counts the calls that failed with client_errc e; they sum to
    /// `failed` (every error the client delivers is a client_errc).
    std::array<std::uint64_t, client_errc_count> failed_by_kind{};

    std::uint64_t failures(client_errc e) const noexcept {
        const auto i = static_cast<std::size_t>(e);
        return i >= 1 && i <= client_errc_count ? failed_by_kind[i - 1] : 0;
    }
};

using client_callback = std::function<void(result<client_response>)>;

class client {
public:
    /// Starts no thread; the client's own loop starts on first need, the resolver thread
    /// (upstream_options::resolve_interval) on the first call. With an https address it
    /// loads the TLS settings now: throws std::invalid_argument when options.tls.ca_file
    /// cannot be loaded, or options.tls.cert_file / key_file cannot (naming the option, the
    /// file and why); logs a warning naming the upstream when verification is off.
    explicit client(upstream target, client_options options = {});
    /// Cancels every call in flight (their callbacks run with cancelled, on their loops, unless
    /// those have stopped), closes every connection, and joins the client's own loop thread
    /// and its resolver thread (a lookup in progress is waited for at most 100 ms, then left
    /// to end on its own: upstream_options::resolve).
    /// Must not run on the client's own loop (that is, not inside a callback of a call made
    /// without a reactor executor).
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Sends `request`; `done` runs exactly once on `on`'s loop (posted, never inline), with
    /// the response or an error. If that loop has stopped by then, `done` is destroyed unrun.
    /// Thread-safe. An empty executor: `done` runs on the client's own loop.
    client_call send(const executor& on, client_request request, client_callback done);

    /// The coroutine style: `co_await client.async_send(ex.executor(), req)`. When the exchange
    /// ends first (client gone, async timeout, stop) the call is cancelled (its connection
    /// closed) and the await gives std::errc::operation_canceled (the async_op contract).
    async_op<client_response> async_send(const executor& on, client_request request);

    /// The streaming style: the response's head and body go to `handler` as they arrive, with
    /// backpressure through the returned handle's pause_body() / resume_body(). The body is not
    /// kept, so max_response_bytes bounds the head only. Thread-safe. The connection goes back
    /// to the pool only after a body that ended cleanly; cancel() closes it.
    client_call send_streaming(const executor& on, client_request request, client_stream_handler handler);

    /// The streaming style in a coroutine: `co_await client.stream(ex.executor(), req)` gives the
    /// head as a client_body_stream, whose next() gives the body piece by piece with
    /// backpressure (client_stream.h). It is send_streaming underneath. The await fails as
    /// async_send's does: a client_errc, or std::errc::operation_canceled when the exchange
    /// ended first (the call is then cancelled, its connection closed).
    async_op<client_body_stream> stream(const executor& on, client_request request);

    /// The blocking style: runs the call on the client's own loop and waits for it. Thread-safe.
    /// Called on a reactor loop it blocks that loop for the whole call (the watchdog names it).
    result<client_response> send_blocking(client_request request);

    client_stats stats() const noexcept;
    const client_options& options() const noexcept;

private:
    std::shared_ptr<detail::client_core> core_;
};

} // namespace sluice

template <>
struct std::is_error_code_enum<sluice::client_errc> : std::true_type {};

// client::stream's result type; after everything above, which it uses.
#include <sluice/client_stream.h>
