#include "support/open_fds.h"

#include <dirent.h>

namespace sluice::test {

std::size_t open_fds() {
    std::size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr) {
            ++n;
        }
        ::closedir(d);
    }
    return n;
}

} // namespace sluice::test
