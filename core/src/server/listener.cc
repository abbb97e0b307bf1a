#include "server/listener.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "server/connection.h"
#include "server/loop_context.h"
#include "server/socket_util.h"
#include "tls/tls_driver.h"

namespace sluice::detail {

listener::listener(detail::loop& l, int fd, sink s)
    : loop_(l), fd_(fd), sink_(std::move(s)), retry_(&on_retry, this) {
    loop_.retain();
}

listener::~listener() {
    loop_.cancel(retry_);
    if (!closed_) {
        ::close(fd_);
        loop_.release();
    }
}

bool listener::start() {
    const int rc = loop_.driver().accept(fd_, this);
    if (rc < 0) {
        loop_.log().error("loop {}: cannot accept: {}", loop_.index(), std::system_category().message(-rc));
        return false;
    }
    return true;
}

void listener::close() noexcept {
    if (closing_) {
        return;
    }
    closing_ = true;
    loop_.cancel(retry_);
    loop_.driver().close(fd_, this);
}

void listener::on_retry(timer& t) noexcept {
    auto* self = static_cast<listener*>(t.ctx);
    if (!self->closing_) {
        self->start();
    }
}

void listener::on_io(const io::completion& c) noexcept {
    if (c.kind == io::op::close) {
        closed_ = true;
        loop_.release();
        return;
    }
    if (c.kind != io::op::accept) {
        return;
    }
    if (c.result >= 0) {
        // Even while closing (an accept that completed before the cancel, io_uring): the kernel
        // has completed the handshake and the client may have sent its request; closing would
        // reset it. The connection joins the drain instead (adopt_connection).
        sink_(c.result);
    } else if (!c.more && !closing_) {
        // Out of descriptors or memory (or anything else that stopped accepting): say so, and
        // accept again a little later rather than spin; connections wait in the backlog.
        loop_.log().warn("loop {}: accept: {} (retrying in 100 ms)", loop_.index(),
                         std::system_category().message(-c.result));
        loop_.arm_after(retry_, std::chrono::milliseconds(100));
        return;
    }
    if (!c.more && !closing_) {
        start();
    }
}

void adopt_connection(loop_context& lc, int fd, listener_kind kind) noexcept {
    if (lc.server.open_connections.fetch_add(1, std::memory_order_relaxed) >=
        lc.server.cfg.limits.max_connections) {
        lc.server.open_connections.fetch_sub(1, std::memory_order_relaxed);
        ::close(fd);
        lc.note_refused();
        return;
    }
    // Responses are written whole; Nagle would only delay the last segment (RFC 896 vs
    // delayed ACKs).
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    lc.counters.add(lc.counters.accepted, 1);
    // The one place a connection becomes TLS: by the socket it was accepted on, never by what
    // it sends (a plaintext port that sniffed for TLS would let a client pick its protocol).
    // lc.tls is set on every loop of a server with tls.cert; a TLS listener exists only then.
    tls_driver* const tls = kind == listener_kind::tls ? lc.tls : nullptr;
    if (kind == listener_kind::tls && tls == nullptr) {
        lc.server.open_connections.fetch_sub(1, std::memory_order_relaxed);
        ::close(fd); // never served as plaintext: the server was not given a certificate
        return;
    }
    if (tls != nullptr && tls->adopt_server(fd) < 0) {
        lc.server.open_connections.fetch_sub(1, std::memory_order_relaxed);
        ::close(fd);
        return;
    }
    connection* c = nullptr;
    try {
        c = new connection(lc, fd, peer_address(fd));
    } catch (const std::bad_alloc&) {
        if (tls != nullptr) {
            tls->forget(fd);
        }
        lc.server.open_connections.fetch_sub(1, std::memory_order_relaxed);
        ::close(fd);
        return;
    }
    c->start();
    if (lc.shutting_down()) {
        c->shutdown(); // accepted after the drain began: answer what it sent, then close
    }
}

} // namespace sluice::detail
