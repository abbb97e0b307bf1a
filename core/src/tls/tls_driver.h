// TLS as a driver decorator: it wraps the backend's io::driver for one loop and keeps the
// driver contract (backend.h rules 1-7) for its owners, so neither the server connection,
// nor the client transport, nor any backend learns about TLS (DESIGN.md, "One byte stream
// under both sides"; docs/tls.md).
//
// A descriptor is TLS once adopt_server() or adopt_client() marked it; every other descriptor passes through
// untouched (one table look-up per verb, one bit test per completion). For a TLS descriptor
// the decorator is the inner driver's owner (its state's address with the low bit set):
//
//   inner recv (ciphertext, lent) --BIO--> SSL --> plaintext in a decorator buffer, reported
//       to the owner as op::recv (lent: id with the top bit set, given back by release())
//   owner send (plaintext) --> SSL_write --> ciphertext queue --> one inner send at a time
//       (rule 7), handshake and alert records in the same queue; one op::send to the owner
//       with the plaintext count once its ciphertext is all sent; after a partial inner send,
//       the share of the plaintext whose ciphertext went out (or 0), and the owner sends the
//       rest again (rule 7; the bytes already encrypted are skipped, its write deadline acts).
//       At most 256 KiB of plaintext is encrypted ahead of the kernel.
//   records OpenSSL makes while reading (KeyUpdate answers, alerts) join the same queue; while
//       more than the owner's send plus 64 KiB of it waits, the inner recv is paused (the peer
//       does not read: TCP holds it back) and re-armed as the queue drains
//
// Per descriptor:
//
//   adopt_server ──> handshaking ──(SSL_do_handshake == 1)──> open ──(owner close)──> closing
//                       │  (timeout, bad record, EOF)            │ (close_notify, EOF, error)
//                       └──────> failed: the owner's recv ends ──┘ with 0 or -errno
//
// A server descriptor whose first byte is an upper case letter never reaches OpenSSL: it may
// be plaintext HTTP, which gets a 400 (tls/plain_http_probe.h), a shut write side, and its
// further bytes dropped until EOF or the handshake deadline.
//
// The owner sees no byte before the handshake ends. tls.handshake_timeout_ms is enforced here,
// by shortening the inner wait() to the earliest handshake deadline. close() sends a
// best-effort close_notify, then closes; the state is freed after the inner op::close.
//
// The client side (adopt_client, an upstream connection): the owner's connect() goes to the
// inner driver with the decorator as owner; once TCP is up the decorator sends the ClientHello
// and reports the owner's op::connect only when the handshake ends: 0, -EKEYREJECTED (the
// certificate failed verification) or -EPROTO (any other failure, the peer's EOF included).
// So the owner's connect timeout bounds the handshake too, and the client's connection code
// is the same for http and https. After the handshake a client's stream that ends without
// close_notify ends with -ECONNRESET, not 0: a FIN is unauthenticated, and a response body
// that ends with the stream would be taken whole though cut (RFC 8446 6.1). A server's ends
// with 0 either way (a request's framing never rests on the end of the stream).
//
//   adopt_client ──connect──> tcp ──(inner op::connect 0: ClientHello)──> handshaking
//        ──(done)──> op::connect 0 to the owner ──> open (as above)
//        ──(inner connect failed)──> op::connect -errno;  (handshake failed)──> op::connect
//        -EKEYREJECTED / -EPROTO; the owner closes
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sluice/backend.h>
#include <sluice/tls_info.h>

#include "tls/tls_bio.h"

struct ssl_st;

namespace sluice::detail {

class tls_context;
class client_tls_context;

class tls_driver final : public io::driver {
public:
    /// `server` is the TLS listener's context; null on a loop of a server without tls.cert
    /// (then only adopt_client() marks descriptors).
    tls_driver(std::unique_ptr<io::driver> inner, const tls_context* server);
    ~tls_driver() override;
    tls_driver(const tls_driver&) = delete;
    tls_driver& operator=(const tls_driver&) = delete;

    /// Marks an accepted descriptor as the server side of a TLS connection, before its owner's
    /// first verb. Returns 0 or -errno (out of memory); the caller then closes fd itself.
    int adopt_server(int fd) noexcept;
    /// Marks a socket that is about to connect as the client side of a TLS connection to
    /// `ctx`'s upstream address `address`, before its owner's connect(). Returns 0 or -errno
    /// (out of memory); the caller then closes fd itself. `ctx` must outlive the owner's close().
    int adopt_client(int fd, client_tls_context& ctx, std::size_t address) noexcept;
    /// What the handlers of fd's connection see (request::tls()): made once, when a server-side
    /// handshake ended; null for a descriptor that is not TLS or whose handshake has not ended.
    /// The owner asks once it has received bytes (they come after the handshake, so the answer
    /// is set by then) and keeps the pointer: the state it comes from goes at close().
    std::shared_ptr<const tls_info> peer_info(int fd) const noexcept;
    /// Whether fd is a TLS connection: its peer may send records of its own (a KeyUpdate, an
    /// alert, close_notify) at any time, which the owner never sees.
    bool is_tls(int fd) const noexcept { return find(fd) != nullptr; }
    /// The owner's close of fd is to look like a truncation (a cut body that ends by the
    /// close): no close_notify.
    void skip_close_notify(int fd) noexcept;
    /// Whether records of fd's connection are still to be handed to the kernel.
    bool has_unsent(int fd) const noexcept;
    /// Drops what adopt_server() / adopt_client() made for fd when no owner will ever use it.
    void forget(int fd) noexcept;

    int accept(int listen_fd, void* owner) noexcept override;
    int recv(int fd, void* owner) noexcept override;
    void pause_recv(int fd, void* owner) noexcept override;
    int send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept override;
    int connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept override;
    int shutdown_send(int fd) noexcept override;
    void close(int fd, void* owner) noexcept override;
    int wait(std::chrono::nanoseconds timeout, std::vector<io::completion>& out) noexcept override;
    void release(std::uint32_t buffer) noexcept override;
    void wake() noexcept override;

    struct conn; ///< one TLS descriptor's state (tls/tls_conn.h)

private:
    using clock = std::chrono::steady_clock;

    conn* find(int fd) const noexcept;
    conn* adopt(int fd, ssl_st* ssl) noexcept;
    void on_inner_connected(conn& s, std::int32_t result) noexcept;
    void report_connect(conn& s, std::int32_t result) noexcept;
    void on_inner(const io::completion& c) noexcept;
    void on_inner_eof(conn& s) noexcept;
    void on_cipher(conn& s, const char* data, std::size_t len) noexcept;
    void probe_first_bytes(conn& s, const char* data, std::size_t len) noexcept;
    void handshake(conn& s) noexcept;
    void read_plain(conn& s) noexcept;
    void encrypt_owner_send(conn& s) noexcept;
    void flush(conn& s) noexcept;
    /// The owner's send ends with `error` (a completion is due).
    void fail_owner_send(conn& s, std::int32_t error) noexcept;
    void on_inner_sent(conn& s, std::int32_t result) noexcept;
    void fail(conn& s, std::int32_t result) noexcept;
    void arm_inner_recv(conn& s) noexcept;
    void touch(conn& s) noexcept;
    void deliver(conn& s, std::vector<io::completion>& out) noexcept;
    void end_handshake_clock(conn& s) noexcept;
    void expire_handshakes(clock::time_point now) noexcept;
    bool reserve_plain(conn& s) noexcept;
    void give_plain(conn& s) noexcept;
    void prime_queue(conn& s) noexcept;
    /// Writes close_notify straight to the socket, once, when nothing else is being sent.
    void send_close_notify(conn& s) noexcept;
    void give_string(std::string& s) noexcept;
    void free_conn(conn& s) noexcept;

    std::unique_ptr<io::driver> inner_;
    const tls_context* ctx_;                   // the server side's; null: client descriptors only
    std::vector<conn*> by_fd_;                 // TLS state of each open descriptor, or null
    std::vector<std::unique_ptr<conn>> slots_; // every live state, by its buffer id
    std::vector<std::uint32_t> free_slots_;
    std::vector<conn*> touched_;   // states with something to report at the next wait()
    std::vector<conn*> graveyard_; // closed: freed at the start of the next wait()
    std::multimap<clock::time_point, conn*> handshake_deadlines_;
    std::vector<io::completion> pending_;              // completions made outside wait() (pause_recv)
    std::vector<std::string> spare_strings_;           // ciphertext queues of idle connections, for reuse
    std::vector<std::unique_ptr<char[]>> spare_plain_; // plaintext buffers (plain_chunk * 2)
};

} // namespace sluice::detail
