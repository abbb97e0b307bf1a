#include <unistd.h>

#include <sluice/config.h>

extern char** environ;

namespace sluice {

std::span<const char* const> process_environment() noexcept {
    std::size_t n = 0;
    while (environ != nullptr && environ[n] != nullptr) {
        ++n;
    }
    return {const_cast<const char* const*>(environ), n};
}

} // namespace sluice
