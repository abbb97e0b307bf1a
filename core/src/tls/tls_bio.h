// The BIO between OpenSSL and a TLS connection's own buffers (instead of BIO_s_mem, which
// would copy every record once more): reads come straight from the receive buffer the
// driver lent, writes append to the connection's ciphertext queue.
#pragma once

#include <cstddef>
#include <string>

struct bio_st;

namespace sluice::detail {

/// What one BIO reads from and writes to; owned by the TLS connection, which points `in` at
/// each lent buffer while OpenSSL works on it.
struct tls_bio_io {
    const char* in = nullptr;
    std::size_t in_len = 0;
    std::string* out = nullptr;
};

/// A new BIO over io (not owned); null when out of memory.
bio_st* new_tls_bio(tls_bio_io& io) noexcept;

} // namespace sluice::detail
