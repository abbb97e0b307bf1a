// Opening a file the configuration names (a certificate, a key, a CA file, the config file)
// without waiting on it: O_NONBLOCK, so that a FIFO with nobody at the other end is refused at
// once instead of blocking open() for ever (after run_until_signal has blocked SIGTERM).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace sluice::detail {

struct opened_file {
    int fd = -1;          ///< open for reading, or -1
    int error = 0;        ///< errno of the failed open() or fstat()
    bool regular = false; ///< false with error 0: it opened, but is a FIFO, a directory, a device

    /// "cannot open 'path': <reason>" or "'path' is not a regular file".
    std::string why(const std::string& path) const {
        return error != 0 ? "cannot open '" + path + "': " + std::generic_category().message(error)
                          : "'" + path + "' is not a regular file";
    }
};

/// The regular file at `path`, open for reading (the caller closes fd), or why not.
inline opened_file open_regular_file(const std::string& path) {
    opened_file f;
    f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f.fd < 0) {
        f.error = errno;
        return f;
    }
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) {
        f.error = errno;
    } else {
        f.regular = S_ISREG(st.st_mode);
    }
    if (!f.regular) {
        ::close(f.fd);
        f.fd = -1;
    }
    return f;
}

} // namespace sluice::detail
