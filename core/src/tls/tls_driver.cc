#include "tls/tls_driver.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tls/client_tls_context.h"
#include "tls/describe_tls.h"
#include "tls/plain_http_probe.h"
#include "tls/tls_conn.h"
#include "tls/tls_context.h"

namespace sluice::detail {

namespace {

// Lent plaintext buffers carry this bit in their id; the inner drivers' ids are pool indices
// far below it (backend.h rule 5), so release() can tell whose buffer it is given.
constexpr std::uint32_t own_buffer = 0x8000'0000U;
// One SSL_read asks for a full record's worth.
constexpr std::size_t plain_chunk = std::size_t{16} * 1024;
constexpr std::size_t plain_buffer_bytes = plain_chunk * 2;
// The most plaintext one owner send() encrypts: a 1 GiB response is not doubled in memory; the
// owner sends the rest (rule 7: fewer bytes than asked).
constexpr std::size_t max_plain_per_send = std::size_t{256} * 1024;
// The most ciphertext beyond the owner's send's own that may wait for the peer while its bytes
// are still read. Records read can make OpenSSL queue records of its own (a KeyUpdate with
// update_requested is answered by a KeyUpdate, RFC 8446 4.6.3; alerts; tickets), so a peer
// that sends and never reads grew the queue without bound. Above this, reading stops until the
// queue drains, as a full send queue stops reading elsewhere: TCP then holds the peer back, and
// the owner's timeouts end the connection. The owner's send is allowed for on top (its
// ciphertext may wait whole, and a client must still read the early answer, a 413, of an
// upstream that no longer reads its request body), and a handshake's flight fits below it.
constexpr std::size_t max_answer_backlog = std::size_t{64} * 1024;
constexpr std::size_t max_spares = 1024;

// The inner driver's owner for a TLS descriptor: the state's address with the low bit set.
// Owners are objects (aligned), so the bit is free, and wait() tells the two apart with one test.

bool is_tagged(const void* owner) noexcept {
    return (reinterpret_cast<std::uintptr_t>(owner) & 1U) != 0;
}

} // namespace

namespace {
void* tagged(tls_driver::conn* s) noexcept {
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(s) | 1U);
}
tls_driver::conn* untagged(void* owner) noexcept {
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    return reinterpret_cast<tls_driver::conn*>(reinterpret_cast<std::uintptr_t>(owner) & ~std::uintptr_t{1});
}
// Ciphertext not yet with the kernel: queued, and the rest of the send in flight.
std::size_t cipher_waiting(const tls_driver::conn& s) noexcept {
    return s.queued.size() + (s.sending.size() - std::min(s.sending_off, s.sending.size()));
}
// The owner's plaintext encrypted and not yet reported.
std::size_t plain_unreported(const tls_driver::conn& s) noexcept {
    return s.plain_batch - s.plain_reported;
}
// Whether the socket still holds received bytes (ahead of a FIN reported while paused).
bool bytes_unread(int fd) noexcept {
    char next = 0;
    return ::recv(fd, &next, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}
// Whether more ciphertext waits for the peer than the owner's send accounts for plus
// max_answer_backlog: then its bytes are not read.
bool backlogged(const tls_driver::conn& s) noexcept {
    const std::size_t waiting = cipher_waiting(s);
    // The owner's plaintext still (partly) unsent, with its records' overhead: 16 KiB records,
    // at most ~330 bytes each (a CBC suite's IV, MAC and padding), and one or two iovecs.
    const std::size_t plain = plain_unreported(s);
    const std::size_t owner = plain > 0 ? plain + plain / 32 + 4096 : 0;
    return waiting > owner + max_answer_backlog;
}
// What to report to the owner after a partial inner send, and counted as reported: the share
// of the batch's plaintext whose ciphertext the kernel has taken, less what was reported. Its
// last byte waits for the queue to empty (flush), so that the final report is never 0.
std::size_t plain_progress(tls_driver::conn& s) noexcept {
    const std::uint64_t total = s.batch_end - s.batch_begin;
    if (total == 0 || s.plain_batch == 0 || s.cipher_sent <= s.batch_begin) {
        return 0;
    }
    const std::uint64_t done = std::min(s.cipher_sent - s.batch_begin, total);
    // plain_batch <= 256 KiB and total < 1 GiB: the product fits in 64 bits.
    const auto due = std::min(static_cast<std::size_t>(s.plain_batch * done / total), s.plain_batch - 1);
    if (due <= s.plain_reported) {
        return 0;
    }
    const std::size_t now = due - s.plain_reported;
    s.plain_reported = due;
    return now;
}
} // namespace

tls_driver::conn::~conn() {
    SSL_free(ssl); // frees the BIO too (SSL_set_bio)
}

tls_driver::tls_driver(std::unique_ptr<io::driver> inner, const tls_context* server)
    : inner_(std::move(inner)), ctx_(server) {}

tls_driver::~tls_driver() = default;

tls_driver::conn* tls_driver::find(int fd) const noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= by_fd_.size()) {
        return nullptr;
    }
    return by_fd_[static_cast<std::size_t>(fd)];
}

// Takes ownership of ssl (freed on failure) and makes fd's state; null when out of memory.
tls_driver::conn* tls_driver::adopt(int fd, ssl_st* ssl) noexcept {
    std::unique_ptr<SSL, decltype(&SSL_free)> owned(ssl, &SSL_free);
    if (fd < 0 || ssl == nullptr) {
        return nullptr;
    }
    try {
        if (static_cast<std::size_t>(fd) >= by_fd_.size()) {
            by_fd_.resize(static_cast<std::size_t>(fd) + 1 + by_fd_.size() / 2, nullptr);
        }
        std::uint32_t slot = 0;
        if (free_slots_.empty()) {
            slot = static_cast<std::uint32_t>(slots_.size());
            if (slot >= own_buffer) {
                return nullptr;
            }
            slots_.emplace_back();
        } else {
            slot = free_slots_.back();
        }
        auto s = std::make_unique<conn>(fd, slot);
        BIO* b = new_tls_bio(s->bio);
        if (b == nullptr) {
            ERR_clear_error();
            return nullptr;
        }
        s->ssl = owned.release();
        s->bio.out = &s->queued;
        SSL_set_bio(s->ssl, b, b);
        if (!free_slots_.empty()) {
            free_slots_.pop_back();
        }
        conn* made = s.get();
        by_fd_[static_cast<std::size_t>(fd)] = made;
        slots_[slot] = std::move(s);
        return made;
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}

int tls_driver::adopt_server(int fd) noexcept {
    if (fd < 0) {
        return -EBADF;
    }
    if (ctx_ == nullptr) {
        return -EINVAL; // a plaintext listener's loop
    }
    ERR_clear_error();
    // The current certificates (a SIGHUP reload swaps them; this connection keeps its own).
    SSL* ssl = ctx_->new_ssl();
    if (ssl == nullptr) {
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_accept_state(ssl);
    conn* s = adopt(fd, ssl);
    if (s == nullptr) {
        return -ENOMEM;
    }
    try {
        const auto when = clock::now() + std::chrono::milliseconds(ctx_->handshake_timeout_ms());
        s->deadline = handshake_deadlines_.emplace(when, s);
        s->has_deadline = true;
    } catch (const std::bad_alloc&) {
        forget(fd);
        return -ENOMEM;
    }
    return 0;
}

int tls_driver::adopt_client(int fd, client_tls_context& ctx, std::size_t address) noexcept {
    if (fd < 0) {
        return -EBADF;
    }
    // No handshake deadline here: the owner's connect timeout bounds the handshake (its
    // op::connect comes at the handshake's end), and it closes the socket when it runs out.
    conn* s = adopt(fd, ctx.new_ssl(address));
    if (s == nullptr) {
        return -ENOMEM;
    }
    s->client = &ctx;
    return 0;
}

std::shared_ptr<const tls_info> tls_driver::peer_info(int fd) const noexcept {
    const conn* s = find(fd);
    return s != nullptr ? s->info : nullptr;
}

void tls_driver::forget(int fd) noexcept {
    if (conn* s = find(fd)) {
        by_fd_[static_cast<std::size_t>(fd)] = nullptr;
        free_conn(*s);
    }
}

// ---------------------------------------------------------------------------------------------
// Verbs

int tls_driver::accept(int listen_fd, void* owner) noexcept {
    return inner_->accept(listen_fd, owner);
}

int tls_driver::connect(int fd, const sockaddr* addr, socklen_t len, void* owner) noexcept {
    conn* s = find(fd);
    if (s == nullptr || s->client == nullptr) {
        return inner_->connect(fd, addr, len, owner);
    }
    // The owner hears of the connect when the handshake has ended (on_inner_connected).
    s->owner = owner;
    return inner_->connect(fd, addr, len, tagged(s));
}

void tls_driver::wake() noexcept {
    inner_->wake();
}

int tls_driver::recv(int fd, void* owner) noexcept {
    conn* s = find(fd);
    if (s == nullptr) {
        return inner_->recv(fd, owner);
    }
    s->owner = owner;
    s->owner_recv = true;
    if (s->eof_unread) {
        // The hang-up told while paused: read the ciphertext ahead of the FIN, whose end the
        // inner driver reports again (rule 6).
        s->eof_unread = false;
        s->has_final = false;
        s->final_reported = false;
    }
    if (s->plain_len > 0 || s->has_final) {
        s->final_reported = false; // re-armed after the end: say it again (rule 6)
        touch(*s);
    }
    arm_inner_recv(*s);
    return 0;
}

void tls_driver::pause_recv(int fd, void* owner) noexcept {
    conn* s = find(fd);
    if (s == nullptr) {
        inner_->pause_recv(fd, owner);
        return;
    }
    if (!s->owner_recv) {
        return;
    }
    s->owner_recv = false;
    try {
        pending_.push_back({owner, io::op::recv, false, -ECANCELED, io::no_buffer, nullptr});
    } catch (const std::bad_alloc&) {
        // Without the final completion the owner would wait for it forever: fail the stream.
        fail(*s, -ENOMEM);
    }
    // The handshake needs its bytes whatever the owner wants; after it, stop the ciphertext too
    // (backpressure reaches the peer; the inner driver still reports a hang-up, rule 6).
    if (!s->handshaking && s->inner_recv) {
        inner_->pause_recv(fd, tagged(s));
    }
}

int tls_driver::send(int fd, const iovec* iov, int iovcnt, void* owner) noexcept {
    conn* s = find(fd);
    if (s == nullptr) {
        return inner_->send(fd, iov, iovcnt, owner);
    }
    if (s->owner_send) {
        return -EBUSY; // rule 7
    }
    if (iovcnt < 0) {
        return -EINVAL;
    }
    s->owner = owner;
    s->owner_send = true;
    s->owner_iov = iov;
    s->owner_iovcnt = iovcnt;
    s->encrypted = false;
    if (s->has_final && s->handshaking) {
        // The handshake failed: nothing will ever be encrypted.
        fail_owner_send(*s, -EPIPE);
    } else if (!s->handshaking) {
        encrypt_owner_send(*s);
    }
    return 0;
}

void tls_driver::close(int fd, void* owner) noexcept {
    conn* s = find(fd);
    if (s == nullptr) {
        inner_->close(fd, owner);
        return;
    }
    by_fd_[static_cast<std::size_t>(fd)] = nullptr; // the number may come back for a new socket
    s->owner = owner;
    s->closing = true;
    end_handshake_clock(*s);
    // Ours goes also after the peer's clean end (its close_notify, or a client's bare FIN after
    // a half-close we answered): RFC 8446 6.1 asks each side for one before it closes, and the
    // peer cannot otherwise tell our last response from a truncation. Not after a TLS error or
    // a reset: nobody is there to read it.
    if (!s->has_final || (s->final == 0 && !s->cut)) {
        send_close_notify(*s);
    }
    // SSL_free drops a session whose connection it thinks ended badly (no close_notify sent)
    // from the session cache. The peer closing first (close_notify or a bare FIN, the usual end
    // of keep-alive; an upstream's bare FIN fails its call, but the session's secrets are not
    // the worse for it) is not bad (RFC 4346 dropped that rule), so such a session stays
    // resumable, as on nginx; after a TLS error or a reset OpenSSL's rule stands.
    if (!s->handshaking && (!s->has_final || s->final == 0 || s->cut)) {
        SSL_set_shutdown(s->ssl, SSL_get_shutdown(s->ssl) | SSL_SENT_SHUTDOWN);
    }
    inner_->close(fd, tagged(s));
}

void tls_driver::send_close_notify(conn& s) noexcept {
    // Best effort close_notify (RFC 8446 6.1), written straight to the socket without waiting:
    // it must not hold the close, and nothing may interleave with an inner send in flight.
    if (s.handshaking || s.inner_sending || s.notify_sent) {
        return;
    }
    s.notify_sent = true;
    prime_queue(s);
    ERR_clear_error();
    SSL_shutdown(s.ssl);
    ERR_clear_error();
    if (!s.queued.empty()) {
        [[maybe_unused]] const ssize_t n =
            ::send(s.fd, s.queued.data(), s.queued.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        s.queued.clear();
    }
}

void tls_driver::skip_close_notify(int fd) noexcept {
    if (conn* s = find(fd)) {
        s->notify_sent = true;
    }
}

bool tls_driver::has_unsent(int fd) const noexcept {
    const conn* s = find(fd);
    return s != nullptr && (s->inner_sending || s->shut_due || !s->queued.empty());
}

int tls_driver::shutdown_send(int fd) noexcept {
    conn* s = find(fd);
    if (s == nullptr) {
        return inner_->shutdown_send(fd);
    }
    if (s->handshaking || s->plain_http || (s->has_final && !s->eof_unread)) {
        // Nothing to half-close politely: the owner closes instead. (A hang-up told while the
        // owner was paused, with bytes ahead of it, is not the end yet: eof_unread.)
        return -ENOTCONN;
    }
    if (s->inner_sending) {
        // Records of our own are on their way (an answer OpenSSL wrote while reading): a FIN
        // now would overtake them, and the close_notify could not follow (rule 7). Both go
        // once those are out (flush), and receiving goes on meanwhile.
        s->shut_due = true;
        return 0;
    }
    // Receiving goes on after our close_notify: OpenSSL reads until the peer's (or its FIN).
    send_close_notify(*s);
    return inner_->shutdown_send(fd);
}

void tls_driver::release(std::uint32_t buffer) noexcept {
    if ((buffer & own_buffer) == 0 || buffer == io::no_buffer) {
        inner_->release(buffer);
        return;
    }
    const std::uint32_t slot = buffer & ~own_buffer;
    if (slot < slots_.size() && slots_[slot] != nullptr) {
        conn& s = *slots_[slot];
        s.lent = false;
        s.plain_len = 0;
        give_plain(s); // an idle connection holds no plaintext buffer
    }
}

// ---------------------------------------------------------------------------------------------
// wait(): the inner completions of TLS descriptors become the owners' completions.

int tls_driver::wait(std::chrono::nanoseconds timeout, std::vector<io::completion>& out) noexcept {
    for (conn* s : graveyard_) {
        free_conn(*s);
    }
    graveyard_.clear();
    if (!pending_.empty() || !touched_.empty()) {
        timeout = std::chrono::nanoseconds(0);
    } else if (!handshake_deadlines_.empty()) {
        const auto until = std::max(handshake_deadlines_.begin()->first - clock::now(), clock::duration(0));
        if (timeout < std::chrono::nanoseconds(0) || until < timeout) {
            timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(until);
        }
    }
    const std::size_t start = out.size();
    const int rc = inner_->wait(timeout, out);
    // Completions of plain descriptors stay where they are; those of TLS ones are consumed.
    std::size_t kept = start;
    for (std::size_t i = start; i < out.size(); ++i) {
        if (is_tagged(out[i].owner)) {
            on_inner(out[i]);
        } else {
            out[kept++] = out[i];
        }
    }
    out.resize(kept);
    if (!handshake_deadlines_.empty()) {
        expire_handshakes(clock::now());
    }
    try {
        // At most four completions per touched state (connect, send, data, end): deliver()
        // cannot throw.
        out.reserve(out.size() + pending_.size() + 4 * touched_.size());
        out.insert(out.end(), pending_.begin(), pending_.end());
        pending_.clear();
    } catch (const std::bad_alloc&) {
        // Kept for the next wait(), which returns at once.
        return static_cast<int>(out.size() - start);
    }
    for (conn* s : touched_) {
        deliver(*s, out);
    }
    touched_.clear();
    if (out.size() == start && rc < 0) {
        return rc;
    }
    return static_cast<int>(out.size() - start);
}

void tls_driver::on_inner(const io::completion& c) noexcept {
    conn& s = *untagged(c.owner);
    switch (c.kind) {
    case io::op::recv:
        if (!c.more) {
            s.inner_recv = false;
        }
        if (c.result > 0 && !s.closing && !s.has_final) {
            on_cipher(s, c.data, static_cast<std::size_t>(c.result));
        } else if (c.result == 0 && !s.closing) {
            on_inner_eof(s);
        } else if (c.result < 0 && c.result != -ENOBUFS && c.result != -ECANCELED && c.result != -EAGAIN &&
                   c.result != -EINTR && !s.closing) {
            fail(s, c.result);
        }
        if (c.buffer != io::no_buffer) {
            inner_->release(c.buffer);
        }
        if (!c.more) {
            arm_inner_recv(s); // the inner driver stopped (buffer shortage, or our pause ended)
        }
        break;
    case io::op::send:
        s.inner_sending = false;
        if (!s.closing) {
            on_inner_sent(s, c.result);
        }
        break;
    case io::op::close:
        try {
            pending_.push_back({s.owner, io::op::close, false, 0, io::no_buffer, nullptr});
            graveyard_.push_back(&s);
        } catch (const std::bad_alloc&) {
            // Cannot happen in practice (reserved below); without the report the owner leaks.
        }
        break;
    case io::op::connect:
        if (!s.closing && s.client != nullptr) {
            on_inner_connected(s, c.result);
        }
        break;
    case io::op::accept:
        break;
    }
}

// The inner driver's end of stream, or its word that the peer hung up while receiving was
// paused (rule 6). A close_notify read before it has ended the stream cleanly already.
void tls_driver::on_inner_eof(conn& s) noexcept {
    if (s.has_final) {
        return;
    }
    if (s.client == nullptr || s.handshaking) {
        // A server's peer: a bare FIN after the last request is the usual end of keep-alive, and
        // a request's framing never rests on the end of the stream (RFC 9112 6.3: without a
        // length a request has no body), so a cut request is HTTP's error anyway. It ends the
        // stream as a FIN does, and a paused owner hears it at once (a client gone while its
        // request is suspended). A client's handshake: the connect fails.
        //
        // This may be the hang-up report of a paused receive, with ciphertext still unread ahead
        // of the FIN (requests a half-closed client pipelined): as rule 6 has it, those bytes
        // come when the owner receives again, then the end once more. An owner still receiving
        // (we paused for our own backlog) is told nothing yet: its bytes come first.
        const bool unread = !s.handshaking && bytes_unread(s.fd);
        if (unread && s.owner_recv) {
            return; // arm_inner_recv reads on once the backlog is gone
        }
        fail(s, 0);
        s.eof_unread = unread;
        return;
    }
    // An upstream's response may end with the stream (RFC 9112 6.3, item 8), and a FIN carries no
    // MAC: anyone on the path can send one and cut the body short, the truncation attack close_notify
    // exists for (RFC 8446 6.1, RFC 5246 7.2.1; OpenSSL's own sockets say
    // SSL_R_UNEXPECTED_EOF_WHILE_READING). So an end without close_notify is a reset: the call
    // fails rather than take a cut body as whole. But this may be the hang-up report of a
    // paused receive, with ciphertext (the close_notify, say) still unread before the FIN: the
    // socket tells (a peek, once, at the end of the connection); those bytes are read first.
    if (bytes_unread(s.fd)) {
        return; // arm_inner_recv reads on, now or when the owner receives again
    }
    s.cut = true;
    fail(s, -ECONNRESET);
}

void tls_driver::on_inner_connected(conn& s, std::int32_t result) noexcept {
    if (result < 0) {
        report_connect(s, result); // refused, unreachable: as without TLS
        return;
    }
    // TCP is up: the ClientHello goes out, and the answer is read whatever the owner does.
    arm_inner_recv(s);
    prime_queue(s);
    if (!s.has_final) {
        handshake(s);
    }
    flush(s);
}

void tls_driver::report_connect(conn& s, std::int32_t result) noexcept {
    if (s.connect_reported) {
        return;
    }
    s.connect_reported = true;
    s.connect_due = true;
    s.connect_result = result;
    touch(s);
}

void tls_driver::on_cipher(conn& s, const char* data, std::size_t len) noexcept {
    if (s.client == nullptr && !s.probed) {
        s.probed = s.probe_len == 0 && !may_be_plain_http(data[0]); // TLS: on to OpenSSL for good
        if (!s.probed) {
            probe_first_bytes(s, data, len);
            return;
        }
    }
    s.bio.in = data;
    s.bio.in_len = len;
    prime_queue(s);
    if (s.handshaking) {
        handshake(s);
    }
    if (!s.handshaking && !s.has_final) {
        read_plain(s);
    }
    // Whatever OpenSSL left unread (only after a failure) goes with the lent buffer.
    s.bio.in = nullptr;
    s.bio.in_len = 0;
    flush(s);
    if (s.inner_recv && backlogged(s)) {
        // The peer does not read what these records made us queue: read no more of its bytes
        // until it does (on_inner_sent re-arms). Completions the inner driver made already
        // still come, one batch at most. A hang-up is still reported (rule 6).
        inner_->pause_recv(s.fd, tagged(&s));
    }
}

void tls_driver::probe_first_bytes(conn& s, const char* data, std::size_t len) noexcept {
    if (s.plain_http) {
        return; // after the 400: read and dropped until the peer's EOF
    }
    const std::size_t take = std::min(len, sizeof s.probe - s.probe_len);
    std::memcpy(s.probe + s.probe_len, data, take);
    s.probe_len = static_cast<std::uint8_t>(s.probe_len + take);
    switch (probe_plain_http({s.probe, s.probe_len})) {
    case plain_probe::need_more:
        return;
    case plain_probe::neither:
        fail(s, -EPROTO);
        return;
    case plain_probe::request_line:
        break;
    }
    s.plain_http = true;
    try {
        prime_queue(s);
        append_plain_http_reply(s.queued);
    } catch (const std::bad_alloc&) {
        fail(s, -ENOMEM);
        return;
    }
    flush(s);
}

void tls_driver::handshake(conn& s) noexcept {
    ERR_clear_error();
    const int r = SSL_do_handshake(s.ssl);
    if (r == 1) {
        s.handshaking = false;
        end_handshake_clock(s);
        if (s.client != nullptr) {
            s.client->handshake_done(s.ssl);
            report_connect(s, 0);
        } else {
            // Once per connection, here on the loop thread while the SSL is idle: a handler may
            // run on a pool worker while this loop drives the same SSL, so it never reads it.
            try {
                s.info = describe_tls(s.ssl);
            } catch (const std::bad_alloc&) {
                ERR_clear_error();
                fail(s, -ENOMEM); // a handler must not mistake the connection for plaintext
                return;
            }
        }
        if (s.owner_send && !s.encrypted) {
            encrypt_owner_send(s);
        }
        if (!s.owner_recv && s.inner_recv) {
            inner_->pause_recv(s.fd, tagged(&s)); // paused during the handshake
        }
        return;
    }
    const int err = SSL_get_error(s.ssl, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        // A bad ClientHello, plaintext HTTP, an unsupported version: OpenSSL queued its alert,
        // which flush() sends; the owner sees the stream fail and closes. A client says why
        // (the error queue still holds it) and whether the certificate was the reason.
        const std::int32_t why = s.client != nullptr ? s.client->handshake_failed(s.ssl) : -EPROTO;
        ERR_clear_error();
        fail(s, why);
        return;
    }
    ERR_clear_error();
}

void tls_driver::read_plain(conn& s) noexcept {
    for (;;) {
        if (!reserve_plain(s)) {
            fail(s, -ENOMEM);
            return;
        }
        std::size_t n = 0;
        ERR_clear_error();
        const int r = SSL_read_ex(s.ssl, s.plain.get() + s.plain_len, plain_chunk, &n);
        if (r == 1) {
            s.plain_len += n;
            s.plain_seen = true;
            touch(s);
            continue;
        }
        const int err = SSL_get_error(s.ssl, r);
        if (s.client != nullptr && err == SSL_ERROR_SSL && !s.plain_seen) {
            // Before any byte of an answer: a TLS 1.3 server refusing our certificate (or our
            // lack of one) after our side of the handshake ended. Say why (the error queue
            // still holds it), as for a handshake.
            s.client->refused_after_handshake(s.ssl);
        }
        ERR_clear_error();
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
            break;
        }
        // close_notify: the clean end of the stream; anything else (a renegotiation attempt is
        // refused with an alert, a bad record MAC, a truncated record) fails it.
        fail(s, err == SSL_ERROR_ZERO_RETURN ? 0 : -EPROTO);
        break;
    }
    if (s.plain_len == 0) {
        give_plain(s);
    }
}

void tls_driver::encrypt_owner_send(conn& s) noexcept {
    // A send again after a partial report: what was encrypted for it is still going out (the
    // owner's iovec begins with what was not reported yet), and nothing more is encrypted until
    // all of it is with the kernel and reported. Encrypting the next 256 KiB at each such call
    // (as this once did) grew the queue towards the whole response for a slow reader, and
    // since the queue never emptied, its owner saw no progress until the end and cut the
    // reader at its write deadline.
    if (s.plain_batch == 0) {
        prime_queue(s);
        s.batch_begin = s.cipher_sent + cipher_waiting(s);
        std::size_t offset = 0;
        for (int i = 0; i < s.owner_iovcnt && offset < max_plain_per_send; ++i) {
            const auto* base = static_cast<const char*>(s.owner_iov[i].iov_base);
            const std::size_t len = std::min(s.owner_iov[i].iov_len, max_plain_per_send - offset);
            if (len == 0) {
                continue;
            }
            std::size_t written = 0;
            ERR_clear_error();
            if (SSL_write_ex(s.ssl, base, len, &written) != 1 || written != len) {
                ERR_clear_error();
                fail_owner_send(s, -EPROTO);
                return;
            }
            offset += len;
        }
        s.batch_end = s.cipher_sent + cipher_waiting(s);
        s.plain_batch = offset;
        s.plain_reported = 0;
    }
    s.encrypted = true;
    flush(s);
}

void tls_driver::flush(conn& s) noexcept {
    if (s.inner_sending || s.closing) {
        return;
    }
    if (s.sending_off >= s.sending.size()) {
        s.sending_off = 0;
        if (s.queued.empty()) {
            give_string(s.sending);
            give_string(s.queued);
            if (s.plain_http && !s.reply_shut) {
                // The 400 is out: the FIN tells the client that nothing follows, while its
                // own bytes are still read, so that closing later cannot reset the answer away.
                s.reply_shut = true;
                ::shutdown(s.fd, SHUT_WR);
            }
            if (s.shut_due) {
                s.shut_due = false;
                send_close_notify(s);
                (void)inner_->shutdown_send(s.fd);
            }
            if (s.owner_send && s.encrypted) {
                // Every byte encrypted for the owner is with the kernel.
                s.owner_send = false;
                s.send_done = true;
                s.send_result = static_cast<std::int32_t>(plain_unreported(s));
                s.plain_batch = 0;
                touch(s);
            }
            return;
        }
        s.sending.clear();
        std::swap(s.sending, s.queued);
    }
    s.iov = {s.sending.data() + s.sending_off, s.sending.size() - s.sending_off};
    const int rc = inner_->send(s.fd, &s.iov, 1, tagged(&s));
    if (rc < 0) {
        on_inner_sent(s, rc);
        return;
    }
    s.inner_sending = true;
}

void tls_driver::on_inner_sent(conn& s, std::int32_t result) noexcept {
    if (result < 0) {
        s.sending.clear();
        s.sending_off = 0;
        s.queued.clear();
        if (s.plain_http) {
            fail(s, result); // the 400 could not go out: nothing is left to wait for
        }
        if (s.owner_send) {
            fail_owner_send(s, result);
        }
        arm_inner_recv(s); // a read paused for the queue now sees the socket's end
        return;
    }
    s.sending_off += static_cast<std::size_t>(result);
    s.cipher_sent += static_cast<std::uint64_t>(result);
    if (s.sending_off < s.sending.size() && s.owner_send && s.encrypted) {
        // A partial send: the owner hears how much of its plaintext went out with it (its
        // write deadline sees progress as a plaintext send's would, not once per 256 KiB), or
        // 0, so that its deadline decides (a blocking driver returns after 250 ms for this);
        // it sends the rest again, and flush() resumes then.
        s.owner_send = false;
        s.send_done = true;
        s.send_result = static_cast<std::int32_t>(plain_progress(s));
        touch(s);
        arm_inner_recv(s); // the peer reads: perhaps no longer backlogged
        return;
    }
    flush(s);
    arm_inner_recv(s);
}

void tls_driver::fail(conn& s, std::int32_t result) noexcept {
    if (s.has_final) {
        return;
    }
    s.has_final = true;
    s.final = result;
    s.final_reported = false;
    end_handshake_clock(s);
    if (s.client != nullptr && s.handshaking) {
        // The connect the owner waits for ends here: the certificate, or any other failure
        // (EOF or a reset during the handshake included) as a protocol one.
        report_connect(s, result == -EKEYREJECTED ? result : -EPROTO);
    }
    if (s.owner_send && !s.encrypted) {
        fail_owner_send(s, -EPIPE);
    }
    touch(s);
}

void tls_driver::fail_owner_send(conn& s, std::int32_t error) noexcept {
    s.owner_send = false;
    s.send_done = true;
    s.send_result = error;
    s.plain_batch = 0; // nothing of it is owed any more
    touch(s);
}

void tls_driver::arm_inner_recv(conn& s) noexcept {
    const bool wanted = !s.closing && !s.has_final && (s.handshaking || s.owner_recv) && !backlogged(s);
    if (!wanted || s.inner_recv) {
        return;
    }
    const int rc = inner_->recv(s.fd, tagged(&s));
    if (rc < 0) {
        fail(s, rc);
        return;
    }
    s.inner_recv = true;
}

void tls_driver::touch(conn& s) noexcept {
    if (s.touched) {
        return;
    }
    try {
        touched_.push_back(&s);
        s.touched = true;
    } catch (const std::bad_alloc&) {
    }
}

void tls_driver::deliver(conn& s, std::vector<io::completion>& out) noexcept {
    s.touched = false;
    if (s.closing || s.owner == nullptr) {
        return;
    }
    {
        if (s.connect_due) {
            out.push_back({s.owner, io::op::connect, false, s.connect_result, io::no_buffer, nullptr});
            s.connect_due = false;
        }
        if (s.send_done) {
            out.push_back({s.owner, io::op::send, false, s.send_result, io::no_buffer, nullptr});
            s.send_done = false;
        }
        if (s.owner_recv && s.plain_len > 0 && !s.lent) {
            out.push_back({s.owner, io::op::recv, true, static_cast<std::int32_t>(s.plain_len),
                           own_buffer | s.slot, s.plain.get()});
            s.lent = true;
        }
        // The end of the stream follows the last bytes; a paused owner hears of it at once (rule 6).
        // A client whose handshake failed heard it as its connect's result: nothing more.
        // A cut (an upstream's end without close_notify) is told to a paused owner only when it
        // receives again, after the plaintext that may still wait here: reported now as the
        // reset it is, it would fail a response whose framing ended whole within those bytes;
        // reported as a hang-up (0), it reads as a clean end to an owner that resumed before
        // this completion reached it, and a body cut short would be taken whole. (A client's
        // transport now reads once more after such a 0 too: client/transport.cc.)
        const bool failed_connect = s.client != nullptr && s.handshaking;
        const bool cut_told_later = s.cut && !s.owner_recv;
        if (s.has_final && !s.final_reported && !failed_connect && !cut_told_later &&
            (s.plain_len == 0 || s.lent || !s.owner_recv)) {
            out.push_back({s.owner, io::op::recv, false, s.final, io::no_buffer, nullptr});
            s.final_reported = true;
            s.owner_recv = false;
        }
    }
}

void tls_driver::end_handshake_clock(conn& s) noexcept {
    if (s.has_deadline) {
        handshake_deadlines_.erase(s.deadline);
        s.has_deadline = false;
    }
}

void tls_driver::expire_handshakes(clock::time_point now) noexcept {
    while (!handshake_deadlines_.empty() && handshake_deadlines_.begin()->first <= now) {
        conn& s = *handshake_deadlines_.begin()->second;
        fail(s, -ETIMEDOUT); // also takes it off the clock
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers

bool tls_driver::reserve_plain(conn& s) noexcept {
    if (s.plain_cap - s.plain_len >= plain_chunk) {
        return true;
    }
    try {
        if (s.plain == nullptr && !spare_plain_.empty()) {
            s.plain = std::move(spare_plain_.back());
            spare_plain_.pop_back();
            s.plain_cap = plain_buffer_bytes;
            return true;
        }
        // Several records in one batch: grow (the owner sees them in one completion).
        const std::size_t cap = std::max(plain_buffer_bytes, s.plain_cap * 2);
        auto bigger = std::make_unique_for_overwrite<char[]>(cap);
        if (s.plain_len > 0) {
            std::memcpy(bigger.get(), s.plain.get(), s.plain_len);
        }
        s.plain = std::move(bigger);
        s.plain_cap = cap;
    } catch (const std::bad_alloc&) {
        return false;
    }
    return true;
}

void tls_driver::give_plain(conn& s) noexcept {
    if (s.plain == nullptr || s.lent) {
        return;
    }
    if (s.plain_cap == plain_buffer_bytes && spare_plain_.size() < max_spares) {
        try {
            spare_plain_.push_back(std::move(s.plain));
        } catch (const std::bad_alloc&) {
        }
    }
    s.plain.reset();
    s.plain_cap = 0;
    s.plain_len = 0;
}

// Ciphertext queues come from the spares, so that steady traffic allocates nothing.
void tls_driver::prime_queue(conn& s) noexcept {
    if (s.queued.capacity() <= 15 && !spare_strings_.empty()) {
        s.queued.swap(spare_strings_.back());
        spare_strings_.pop_back();
    }
}

void tls_driver::give_string(std::string& str) noexcept {
    if (str.capacity() <= 15) {
        return; // nothing allocated (the small-string buffer)
    }
    if (spare_strings_.size() < max_spares && str.capacity() <= std::size_t{64} * 1024) {
        try {
            str.clear();
            spare_strings_.push_back(std::move(str));
        } catch (const std::bad_alloc&) {
        }
    }
    std::string().swap(str);
}

void tls_driver::free_conn(conn& s) noexcept {
    const std::uint32_t slot = s.slot;
    end_handshake_clock(s);
    give_plain(s);
    slots_[slot].reset();
    try {
        free_slots_.push_back(slot);
    } catch (const std::bad_alloc&) {
    }
}

} // namespace sluice::detail
