// The logger's default sink and level names.

#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include <sluice/log.h>

namespace sluice {
namespace {

// One line per message: control characters (a newline in a logged request path, say) are
// escaped so that a client cannot forge log lines, and a reader can rely on one event per line.
void append_escaped(std::string& out, std::string_view message) {
    constexpr std::string_view hex = "0123456789abcdef";
    for (const char ch : message) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c == 0x7f) {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0xf];
        } else {
            out += ch;
        }
    }
}

void write_to_stderr(log_level level, std::string_view message) {
    std::string line;
    line.reserve(message.size() + 24);
    line += "sluice ";
    line += to_string(level);
    line += ": ";
    append_escaped(line, message);
    line += '\n';
    // One write(2) per line: the kernel appends it whole (atomic for pipes up to PIPE_BUF), so
    // lines from concurrent threads do not interleave and no lock is needed. A short write (a
    // full pipe, a signal) continues with the rest rather than losing it.
    const char* p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        const ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return; // stderr is gone: there is nowhere left to report that
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

} // namespace

logger::logger(log_level level) : level_(level), sink_(write_to_stderr) {}

// An empty sink discards: logger(level, {}) is the quiet logger tests and tools want.
logger::logger(log_level level, sink s) : level_(level), sink_(std::move(s)) {}

void logger::write(log_level l, std::string_view message) const {
    if (enabled(l) && sink_) {
        sink_(l, message);
    }
}

std::string_view to_string(log_level l) noexcept {
    switch (l) {
    case log_level::error:
        return "error";
    case log_level::warn:
        return "warn";
    case log_level::info:
        return "info";
    case log_level::debug:
        return "debug";
    }
    return "unknown";
}

} // namespace sluice
