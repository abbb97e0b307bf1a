#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/snapshot.h"

namespace sluice::detail {

process_figures read_process_figures() noexcept {
    process_figures p;
    try {
        const long page = ::sysconf(_SC_PAGESIZE);
        const long ticks = ::sysconf(_SC_CLK_TCK);
        std::ifstream statm("/proc/self/statm");
        std::uint64_t size = 0;
        std::uint64_t resident = 0;
        if (statm >> size >> resident && page > 0) {
            p.resident_bytes = resident * static_cast<std::uint64_t>(page);
        }
        // /proc/self/stat: the command name (field 2) may hold spaces and parentheses, so the
        // fields are counted from the last ')'. utime and stime are fields 14 and 15, threads 20.
        std::ifstream stat("/proc/self/stat");
        std::string line;
        if (std::getline(stat, line)) {
            const auto close = line.rfind(')');
            if (close != std::string::npos) {
                std::istringstream rest(line.substr(close + 2));
                std::string field;
                std::uint64_t utime = 0;
                std::uint64_t stime = 0;
                for (int i = 3; i <= 20 && rest >> field; ++i) {
                    if (i == 14) {
                        utime = std::stoull(field);
                    } else if (i == 15) {
                        stime = std::stoull(field);
                    } else if (i == 20) {
                        p.threads = std::stoull(field);
                    }
                }
                if (ticks > 0) {
                    p.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks);
                }
            }
        }
        if (DIR* d = ::opendir("/proc/self/fd")) {
            while (const dirent* e = ::readdir(d)) {
                if (e->d_name[0] != '.') {
                    ++p.open_fds;
                }
            }
            ::closedir(d);
            if (p.open_fds > 0) {
                --p.open_fds; // the directory stream's own descriptor
            }
        }
    } catch (...) {
        // A figure that cannot be read stays 0: a scrape never fails over it.
    }
    return p;
}

} // namespace sluice::detail
