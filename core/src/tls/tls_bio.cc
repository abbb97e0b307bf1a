#include "tls/tls_bio.h"

#include <openssl/bio.h>

#include <cstring>
#include <new>

namespace sluice::detail {

namespace {

int bio_read(BIO* b, char* dst, std::size_t len, std::size_t* done) {
    auto* io = static_cast<tls_bio_io*>(BIO_get_data(b));
    BIO_clear_retry_flags(b);
    if (io->in_len == 0) {
        BIO_set_retry_read(b); // WANT_READ: the next lent buffer continues the record
        return 0;
    }
    const std::size_t n = len < io->in_len ? len : io->in_len;
    std::memcpy(dst, io->in, n);
    io->in += n;
    io->in_len -= n;
    *done = n;
    return 1;
}

int bio_write(BIO* b, const char* src, std::size_t len, std::size_t* done) {
    auto* io = static_cast<tls_bio_io*>(BIO_get_data(b));
    BIO_clear_retry_flags(b);
    try {
        io->out->append(src, len);
    } catch (const std::bad_alloc&) {
        return 0; // an error, not a retry: the connection fails
    }
    *done = len;
    return 1;
}

long bio_ctrl(BIO*, int cmd, long, void*) {
    // FLUSH succeeds (the queue is sent by the driver); everything else, kTLS's
    // BIO_CTRL_GET_KTLS_SEND/RECV included, is "not supported" until kTLS is wired.
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

int bio_create(BIO* b) {
    BIO_set_init(b, 1);
    return 1;
}

const BIO_METHOD* method() noexcept {
    // Built once, on first use; BIO_METHOD is immutable afterwards and shared by every loop.
    static BIO_METHOD* m = [] {
        BIO_METHOD* bm = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice-tls");
        if (bm != nullptr) {
            BIO_meth_set_read_ex(bm, bio_read);
            BIO_meth_set_write_ex(bm, bio_write);
            BIO_meth_set_ctrl(bm, bio_ctrl);
            BIO_meth_set_create(bm, bio_create);
        }
        return bm;
    }();
    return m;
}

} // namespace

bio_st* new_tls_bio(tls_bio_io& io) noexcept {
    const BIO_METHOD* m = method();
    if (m == nullptr) {
        return nullptr;
    }
    BIO* b = BIO_new(m);
    if (b != nullptr) {
        BIO_set_data(b, &io);
    }
    return b;
}

} // namespace sluice::detail
