// A byte stream over the driver seam: one socket, its driver operations, the send in flight,
// and close. The client's connections sit on it today; the server connection moves onto it
// with TLS (issue 9), so that the TLS filter is written once (docs/client.md, "Transport").
//
//   open_and_connect()        on_connected(0)            close() / error
//   [closed] --------> [connecting] --------> [open] ----------------> [closing]
//                           |                                              |
//                           +-- on_connected(-errno) (user calls close) ---+
//                                                         driver's op::close → on_closed()
//
// Rules (driver rules 4, 5, 7 of backend.h, kept here once):
// - The transport is the driver's owner of the fd: it must outlive the op::close
//   completion, so its user frees it only in on_closed(), never before.
// - Received bytes are lent: on_data() must consume or copy them before returning.
// - At most one send is in flight; send() is refused while one is. The iovecs and the memory
//   they point to must stay untouched until on_sent() (the transport re-sends the rest of a
//   partial write itself and reports once, when everything went out, or on failure).
// - Everything runs on the loop's thread.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "loop/loop.h"
#include "loop/paused_hang_up.h"

namespace sluice::detail {

class client_tls_context;

class transport_user {
public:
    /// The connect finished: 0 or -errno.
    virtual void on_connected(int result) noexcept = 0;
    /// Bytes arrived (lent until return).
    virtual void on_data(std::string_view bytes) noexcept = 0;
    /// The peer ended the stream (0) or the socket failed (-errno). Receiving has stopped.
    virtual void on_peer_closed(int result) noexcept = 0;
    /// The whole send finished (0) or failed (-errno).
    virtual void on_sent(int result) noexcept = 0;
    /// The driver released the fd: the last call; the user may free the transport now.
    virtual void on_closed() noexcept = 0;

protected:
    ~transport_user() = default;
};

class transport final : public io_handler {
public:
    transport(loop& l, transport_user& user) noexcept : loop_(l), user_(user) {}
    transport(const transport&) = delete;
    transport& operator=(const transport&) = delete;

    /// Opens a non-blocking socket for addr's family and starts connecting. -errno when that
    /// failed: then is_closed() says whether nothing was opened, or on_closed() will follow.
    /// With `tls`, the socket speaks TLS as the client of `tls`'s upstream host
    /// `tls_address` (the loop's TLS decorator, tls/tls_driver.h): on_connected() then comes
    /// when the handshake has ended, and every byte after it is plaintext as without TLS.
    int open_and_connect(const sockaddr* addr, socklen_t len, client_tls_context* tls = nullptr,
                         std::size_t tls_address = 0) noexcept;
    /// Takes an fd that is connected already (an accepted socket, as the server connection
    /// will use it; a test's fake descriptor). on_closed() follows close().
    void adopt(int fd) noexcept {
        fd_ = fd;
        state_ = state::open;
    }
    /// Arms receiving (multishot; re-armed after a driver-side stop). -errno on failure.
    int start_receiving() noexcept;
    /// Backpressure: stops receiving until resume_receiving(). Data of completions already
    /// produced still arrives through on_data(). A reset is still reported at once (driver
    /// rule 6); an orderly end of stream is held back until resume_receiving(), since bytes
    /// the peer sent before its FIN may still wait in the socket (a close-delimited body).
    void pause_receiving() noexcept;
    /// Receives again after pause_receiving(). -errno when re-arming failed.
    int resume_receiving() noexcept;
    bool receiving_paused() const noexcept { return recv_paused_; }
    /// Sends iov[0..n) (n <= 2) completely; one on_sent() follows. -EBUSY while a send is in
    /// flight, -errno when the driver refused (then no on_sent()).
    int send(const iovec* iov, int n) noexcept;
    /// Closes (idempotent); on_closed() follows, after completions already produced.
    void close() noexcept;

    bool is_closed() const noexcept { return state_ == state::closed; }
    bool is_open() const noexcept { return state_ == state::connecting || state_ == state::open; }
    bool sending() const noexcept { return sending_; }
    /// Bytes of the current send that went out so far.
    std::size_t bytes_sent() const noexcept { return sent_; }
    /// Whether any byte may be on the wire: some were reported sent, or a send was reported
    /// as 0 bytes, which the TLS decorator does for a partial inner send (its bytes are out).
    bool may_have_written() const noexcept { return sent_ > 0 || zero_report_; }
    loop& owner_loop() const noexcept { return loop_; }

    void on_io(const io::completion& c) noexcept override;

private:
    enum class state : std::uint8_t { closed, connecting, open, closing };
    void on_recv(const io::completion& c) noexcept;
    void on_send(const io::completion& c) noexcept;
    bool send_rest() noexcept;

    loop& loop_;
    transport_user& user_;
    sockaddr_storage addr_{}; // kept: a completion driver may read it after connect() returns
    iovec iov_[2]{};
    int iov_count_ = 0;
    std::size_t sent_ = 0;
    bool zero_report_ = false;
    int fd_ = -1;
    state state_ = state::closed;
    bool sending_ = false;
    bool recv_armed_ = false;
    bool recv_paused_ = false;
    paused_hang_up hang_up_;
    bool peer_closed_ = false;
};

} // namespace sluice::detail
