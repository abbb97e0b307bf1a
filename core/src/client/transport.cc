// The byte stream over the driver seam (see transport.h).
#include "client/transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tls/tls_driver.h"

namespace sluice::detail {

int transport::open_and_connect(const sockaddr* addr, socklen_t len, client_tls_context* tls,
                                std::size_t tls_address) noexcept {
    const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (tls != nullptr) {
        // Marked before the first verb, so the decorator owns the connect (its handshake).
        const int rc =
            loop_.tls() == nullptr ? -EPROTONOSUPPORT : loop_.tls()->adopt_client(fd, *tls, tls_address);
        if (rc < 0) {
            ::close(fd);
            return rc;
        }
    }
    // Requests are written whole; Nagle would only hold back a small head behind a body.
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::memcpy(&addr_, addr, len);
    fd_ = fd;
    state_ = state::connecting;
    const int rc = loop_.driver().connect(fd_, reinterpret_cast<const sockaddr*>(&addr_), len, this);
    if (rc < 0) {
        // Nothing was armed on the fd, but the driver may have registered it: close through
        // the driver so that its tables forget it, and report the failure as a connect result.
        state_ = state::open; // let close() run
        close();
        return rc;
    }
    return 0;
}

int transport::start_receiving() noexcept {
    if (state_ != state::open || recv_armed_ || recv_paused_ || peer_closed_) {
        return 0;
    }
    recv_armed_ = true;
    hang_up_.armed();
    const int rc = loop_.driver().recv(fd_, this);
    if (rc < 0) {
        recv_armed_ = false;
    }
    return rc;
}

void transport::pause_receiving() noexcept {
    if (recv_paused_ || state_ != state::open) {
        return;
    }
    recv_paused_ = true;
    hang_up_.paused(); // an end of stream may now be a report of the pause (see on_recv)
    if (recv_armed_) {
        // The final completion (more == false) clears recv_armed_; on_recv does not re-arm
        // while paused.
        loop_.driver().pause_recv(fd_, this);
    }
}

int transport::resume_receiving() noexcept {
    if (!recv_paused_) {
        return 0;
    }
    recv_paused_ = false;
    // Still armed when the pause's final completion has not come yet: then on_recv re-arms.
    return recv_armed_ ? 0 : start_receiving();
}

int transport::send(const iovec* iov, int n) noexcept {
    if (sending_) {
        return -EBUSY;
    }
    if (state_ != state::open) {
        return -ENOTCONN;
    }
    iov_count_ = 0;
    for (int i = 0; i < n && i < 2; ++i) {
        if (iov[i].iov_len > 0) {
            iov_[iov_count_++] = iov[i];
        }
    }
    sent_ = 0;
    zero_report_ = false;
    if (iov_count_ == 0) {
        return -EINVAL;
    }
    return send_rest() ? 0 : -EIO;
}

bool transport::send_rest() noexcept {
    sending_ = true;
    if (loop_.driver().send(fd_, iov_, iov_count_, this) < 0) {
        sending_ = false;
        return false;
    }
    return true;
}

void transport::close() noexcept {
    if (state_ == state::closed || state_ == state::closing) {
        return;
    }
    state_ = state::closing;
    loop_.driver().close(fd_, this);
}

void transport::on_io(const io::completion& c) noexcept {
    switch (c.kind) {
    case io::op::connect:
        if (state_ == state::connecting) {
            state_ = state::open; // also on failure: the fd is still the driver's until close()
            user_.on_connected(c.result);
        }
        break;
    case io::op::recv:
        on_recv(c);
        break;
    case io::op::send:
        on_send(c);
        break;
    case io::op::close:
        state_ = state::closed;
        fd_ = -1;
        user_.on_closed();
        return; // the user may have freed this
    case io::op::accept:
        break;
    }
}

void transport::on_recv(const io::completion& c) noexcept {
    if (!c.more) {
        recv_armed_ = false;
    }
    if (state_ != state::open) {
        return;
    }
    if (c.result > 0) {
        hang_up_.received();
        user_.on_data({c.data, static_cast<std::size_t>(c.result)});
    } else if (c.result == 0 && !c.more && (hang_up_.stale_end() || recv_paused_)) {
        // The driver reports a hang-up while paused (backend.h rule 6) before the bytes that
        // came ahead of the FIN, and the report may reach us after a resume, even behind the
        // arm made since (loop/paused_hang_up.h). Receive once more: the socket gives the rest,
        // then the end again.
        if (recv_paused_) {
            return; // resume_receiving() re-arms
        }
    } else if (c.result == 0 || (c.result != -ENOBUFS && c.result != -ECANCELED && c.result != -EAGAIN &&
                                 c.result != -EINTR)) {
        peer_closed_ = true;
        user_.on_peer_closed(c.result);
        return;
    }
    // A driver-side stop (buffer shortage) or the end of a pause that was lifted meanwhile:
    // receive again, unless we asked for the pause.
    if (state_ == state::open && !recv_armed_ && !recv_paused_ && !peer_closed_ && start_receiving() < 0) {
        peer_closed_ = true;
        user_.on_peer_closed(-EIO);
    }
}

void transport::on_send(const io::completion& c) noexcept {
    sending_ = false;
    if (state_ != state::open) {
        return;
    }
    if (c.result < 0) {
        user_.on_sent(c.result);
        return;
    }
    auto n = static_cast<std::size_t>(c.result);
    sent_ += n;
    zero_report_ = zero_report_ || n == 0; // a send in flight always has bytes (send())
    // Drop what went out from the front of the iovecs.
    int first = 0;
    while (first < iov_count_ && n >= iov_[first].iov_len) {
        n -= iov_[first].iov_len;
        ++first;
    }
    if (first == iov_count_) {
        iov_count_ = 0;
        user_.on_sent(0);
        return;
    }
    for (int i = first; i < iov_count_; ++i) {
        iov_[i - first] = iov_[i];
    }
    iov_count_ -= first;
    iov_[0].iov_base = static_cast<char*>(iov_[0].iov_base) + n;
    iov_[0].iov_len -= n;
    if (!send_rest()) {
        user_.on_sent(-EIO);
    }
}

} // namespace sluice::detail
