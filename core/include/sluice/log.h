// A small leveled logger. The server owns one and hands it to every component;
// there is no global logger.
#pragma once

#include <fmt/core.h>

#include <functional>
#include <string_view>

#include <sluice/config.h>

namespace sluice {

class logger {
public:
    using sink = std::function<void(log_level, std::string_view)>;

    /// Logs to stderr as "sluice <level>: message".
    explicit logger(log_level level = log_level::info);
    logger(log_level level, sink s);

    bool enabled(log_level l) const noexcept { return l <= level_; }

    template <class... Args>
    void log(log_level l, fmt::format_string<Args...> f, Args&&... args) const {
        if (enabled(l)) {
            write(l, fmt::format(f, std::forward<Args>(args)...));
        }
    }
    template <class... Args>
    void error(fmt::format_string<Args...> f, Args&&... args) const {
        log(log_level::error, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void warn(fmt::format_string<Args...> f, Args&&... args) const {
        log(log_level::warn, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void info(fmt::format_string<Args...> f, Args&&... args) const {
        log(log_level::info, f, std::forward<Args>(args)...);
    }
    template <class... Args>
    void debug(fmt::format_string<Args...> f, Args&&... args) const {
        log(log_level::debug, f, std::forward<Args>(args)...);
    }

    void write(log_level l, std::string_view message) const;

private:
    log_level level_;
    sink sink_;
};

std::string_view to_string(log_level l) noexcept;

} // namespace sluice
