// Registration of the blocking backend (backends/registry.cc lists it).
#include "blocking_driver.h"

namespace sluice::io {

namespace {
std::string probe_blocking(const driver_options&) {
    return "";
} // plain POSIX: always available
} // namespace

const backend& blocking_backend() noexcept {
    static const backend b{"blocking", traits{.connection_per_thread = true}, &probe_blocking,
                           &blocking::driver::create};
    return b;
}

} // namespace sluice::io
