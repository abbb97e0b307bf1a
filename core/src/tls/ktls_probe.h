// Whether kernel TLS could carry this server's records (tls.ktls = true), probed once at start
// and logged, as the uring backend probes its features: OpenSSL built with kTLS
// (SSL_OP_ENABLE_KTLS), the kernel's "tls" upper-layer protocol (CONFIG_TLS; tried on a
// loopback connection with setsockopt(TCP_ULP)), and a BIO that hands records to the socket.
//
// The last is never true today: the TLS driver reads and writes ciphertext through its own
// BIO (tls_bio.cc, backend buffers, no socket BIO), which answers OpenSSL's kTLS controls "not
// supported", so userspace TLS always runs; the probe says which of the three is missing.
#pragma once

#include <string>

namespace sluice::detail {

struct ktls_support {
    bool openssl = false;     ///< OpenSSL built with kTLS
    bool kernel = false;      ///< setsockopt(TCP_ULP, "tls") succeeded
    std::string kernel_error; ///< why the kernel refused (strerror), when it did
    bool driver = false;      ///< the TLS driver can hand records to the kernel (not yet)

    bool usable() const noexcept { return openssl && kernel && driver; }
    /// "kTLS unavailable: <why>, userspace TLS" or "kTLS available".
    std::string describe() const;
};

/// Opens a loopback connection and closes it again; never throws.
ktls_support probe_ktls() noexcept;

} // namespace sluice::detail
