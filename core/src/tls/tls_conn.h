// The state tls_driver keeps for one TLS descriptor (tls_driver.h has the diagram).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tls/tls_bio.h"
#include "tls/tls_driver.h"

namespace sluice::detail {

struct tls_driver::conn {
    conn(int f, std::uint32_t s) : fd(f), slot(s) {}
    ~conn();
    conn(const conn&) = delete;
    conn& operator=(const conn&) = delete;

    int fd;
    std::uint32_t slot;    ///< index in slots_, and the id of its lent plaintext buffer
    void* owner = nullptr; ///< set by the owner's first verb
    ssl_st* ssl = nullptr;
    tls_bio_io bio; ///< in: the lent ciphertext being read; out: &queued

    // Ciphertext. The BIO appends to `queued`; `sending` is the inner send in flight and is
    // never touched until it completes (rule 7), so appending cannot move what the kernel reads.
    std::string queued;
    std::string sending;
    std::size_t sending_off = 0;
    iovec iov{};
    bool inner_sending = false;

    // The owner's send: its iovec (valid until its completion, rule 7), and the batch of its
    // bytes last encrypted: plain_batch bytes of plaintext (0: none in the queue), whose
    // ciphertext lies between batch_begin and batch_end in the count of bytes the kernel took
    // (cipher_sent), plain_reported of them reported. The rest is kept across a partial
    // report: the owner sends it again, from where the report left it.
    const iovec* owner_iov = nullptr;
    int owner_iovcnt = 0;
    bool owner_send = false;
    bool encrypted = false; ///< the batch is owner_iov's first unreported bytes
    std::uint64_t cipher_sent = 0;
    std::uint64_t batch_begin = 0;
    std::uint64_t batch_end = 0;
    std::size_t plain_batch = 0;
    std::size_t plain_reported = 0;
    bool send_done = false; ///< a send completion is due: send_result
    std::int32_t send_result = 0;

    // Plaintext decrypted and not yet seen by the owner; lent while `lent`.
    std::unique_ptr<char[]> plain;
    std::size_t plain_len = 0;
    std::size_t plain_cap = 0;
    bool lent = false;
    bool plain_seen = false; ///< some plaintext was ever read (a client: the answer began)

    bool owner_recv = false; ///< armed from the owner's view (rule 6)
    bool inner_recv = false; ///< armed at the inner driver
    bool handshaking = true;
    bool closing = false;
    bool has_final = false; ///< receiving ended: final is 0 (end of stream) or -errno
    bool final_reported = false;
    std::int32_t final = 0;
    bool cut = false;         ///< a client's stream ended without close_notify: final is -ECONNRESET
    bool notify_sent = false; ///< our close_notify is written (shutdown_send or close)
    bool shut_due = false;    ///< shutdown_send() came while our own records went out: after them
    bool eof_unread =
        false; ///< final 0 told to a paused server owner, ciphertext still unread before the FIN
    bool touched = false;
    bool has_deadline = false;

    // The server side's first bytes (plain_http_probe.h): held back from OpenSSL while they may
    // be a plaintext request line; then the 400 goes out, the write side is shut and what else
    // comes is read and dropped until the peer's EOF (or the handshake deadline).
    bool probed = false;     ///< the first byte was looked at
    bool plain_http = false; ///< answering plaintext HTTP: OpenSSL sees nothing more
    bool reply_shut = false; ///< the 400 is sent and the write side shut
    std::uint8_t probe_len = 0;
    char probe[8]{};

    // The server side: what handlers see (request::tls()), made when the handshake ends.
    std::shared_ptr<const tls_info> info;

    // The client side (adopt_client): the owner's connect completes with the handshake.
    client_tls_context* client = nullptr;
    bool connect_due = false; ///< an op::connect is due to the owner: connect_result
    bool connect_reported = false;
    std::int32_t connect_result = 0;
    std::multimap<std::chrono::steady_clock::time_point, conn*>::iterator deadline;
};

} // namespace sluice::detail
