// parse_command_line(): flags, the app's own options and the usage text. The flags that
// set keys are aliases into the key table (config.cc); --set reaches every key.

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_keys.h"
#include "program_name.h"

namespace sluice {
namespace {

using detail::key_spec;

enum class flag_action { set_key, config_file, set_any, help };

struct flag_spec {
    std::string_view name; ///< without dashes
    flag_action action = flag_action::set_key;
    std::string_view key = {};        ///< set_key: the key it sets
    std::string_view value_name = {}; ///< others: the value's name in the usage text
    std::string_view help = {};       ///< others: the usage line (set_key flags show the key's help)
};

constexpr std::array builtin_flags{
    flag_spec{"backend", flag_action::set_key, "backend"},
    flag_spec{"listen", flag_action::set_key, "listen"},
    flag_spec{"io-threads", flag_action::set_key, "io_threads"},
    flag_spec{"dispatch", flag_action::set_key, "dispatch"},
    flag_spec{"worker-threads", flag_action::set_key, "worker_threads"},
    flag_spec{"threads", flag_action::set_key, "blocking.threads"},
    flag_spec{"tls-listen", flag_action::set_key, "tls.listen"},
    flag_spec{
        "config", flag_action::config_file, {}, "FILE", "TOML configuration file (default: $SLUICE_CONFIG)"},
    flag_spec{
        "set", flag_action::set_any, {}, "KEY=VALUE", "set any configuration key listed below; repeatable"},
    flag_spec{"help", flag_action::help, {}, {}, "print this help and exit"},
};

/// One flag from argv with its value, resolved to a built-in flag or an app option.
struct parsed_flag {
    std::string text; ///< "--io-threads", for messages
    const flag_spec* builtin = nullptr;
    const app_option* app = nullptr;
    std::string_view value;
};

const flag_spec* find_builtin(std::string_view name) {
    const auto it = std::find_if(builtin_flags.begin(), builtin_flags.end(),
                                 [&](const flag_spec& f) { return f.name == name; });
    return it == builtin_flags.end() ? nullptr : &*it;
}

const key_spec& key_of(const flag_spec& f) {
    const key_spec* k = detail::find_config_key(f.key);
    if (k == nullptr) {
        throw std::logic_error("flag --" + std::string(f.name) + " names no key"); // a table typo
    }
    return *k;
}

bool is_flag_name(std::string_view name) {
    return !name.empty() && name.front() >= 'a' && name.front() <= 'z' &&
           std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// App options are the program's own contract, so a bad one is a bug in the program, not a
// startup error for the user: std::invalid_argument.
void check_app_options(std::span<const app_option> options) {
    for (std::size_t i = 0; i < options.size(); ++i) {
        const app_option& o = options[i];
        if (!is_flag_name(o.name)) {
            throw std::invalid_argument("app option '" + o.name +
                                        "': not a flag name (lowercase, digits, '-')");
        }
        if (o.target == nullptr) {
            throw std::invalid_argument("app option --" + o.name + ": no target");
        }
        if (find_builtin(o.name) != nullptr || o.name == "h") {
            throw std::invalid_argument("app option --" + o.name + " collides with a built-in flag");
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (options[j].name == o.name) {
                throw std::invalid_argument("app option --" + o.name + " is given twice");
            }
        }
    }
}

/// Appends "  left  right", with right starting at `column` (or on the next line when left is long).
void append_row(std::string& out, std::string_view left, std::string_view right, std::size_t column = 28) {
    out += "  ";
    out += left;
    if (left.size() + 2 < column) {
        out.append(column - 2 - left.size(), ' ');
    } else {
        out += "\n";
        out.append(column, ' ');
    }
    out += right;
    out += '\n';
}

std::string build_usage(std::string_view program, std::string_view summary, std::span<const app_option> app) {
    const config defaults;
    std::string out = "Usage: " + std::string(program) + " [options]\n";
    if (!summary.empty()) {
        out += "\n";
        out += summary;
        out += "\n";
    }
    out += "\nOptions (\"--flag value\" or \"--flag=value\"):\n";
    for (const flag_spec& f : builtin_flags) {
        if (f.action == flag_action::set_key) {
            const key_spec& k = key_of(f);
            append_row(out, "--" + std::string(f.name) + " " + std::string(k.value_hint),
                       std::string(k.help) + " [key " + std::string(k.name) + "]");
        } else {
            std::string left = "--" + std::string(f.name);
            if (f.action == flag_action::help) {
                left += ", -h";
            }
            if (!f.value_name.empty()) {
                left += " " + std::string(f.value_name);
            }
            append_row(out, left, f.help);
        }
    }
    if (!app.empty()) {
        out += "\nApplication options:\n";
        for (const app_option& o : app) {
            std::string right = o.help;
            if (!o.target->empty()) {
                right += " (default: " + *o.target + ")";
            }
            append_row(out, "--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name), right);
        }
    }
    out += "\nConfiguration keys: set with --set KEY=VALUE, the environment variable SLUICE_KEY\n"
           "(upper case, '.' as '_': SLUICE_LIMITS_MAX_BODY_BYTES), or the TOML file ([limits] tables).\n"
           "Later sources win: defaults < config file < environment < flags.\n";
    for (const key_spec& k : detail::config_keys()) {
        // Three columns: key, accepted values, meaning and default.
        std::string left = std::string(k.name);
        left.resize(std::max<std::size_t>(left.size() + 1, 31), ' ');
        left += k.type == detail::value_type::integer ? std::to_string(k.min) + ".." + std::to_string(k.max)
                                                      : std::string(k.value_hint);
        const std::string value = detail::text_value(defaults, k);
        append_row(out, left, std::string(k.help) + " (default: " + (value.empty() ? "none" : value) + ")",
                   56);
    }
    return out;
}

/// Splits argv into flags with values; throws startup_error naming the flag at fault.
std::vector<parsed_flag> tokenize(int argc, const char* const* argv, std::span<const app_option> app) {
    std::vector<parsed_flag> out;
    std::vector<std::string> known;
    known.reserve(builtin_flags.size() + app.size());
    for (const flag_spec& f : builtin_flags) {
        known.push_back("--" + std::string(f.name));
    }
    for (const app_option& o : app) {
        known.push_back("--" + o.name);
    }
    const std::vector<std::string_view> known_views(known.begin(), known.end());
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg(argv[i] == nullptr ? "" : argv[i]);
        if (!arg.starts_with("--") || arg == "--") {
            if (arg.size() > 1 && arg.front() == '-' && arg != "--") {
                throw startup_error(std::string(arg), "unknown flag (flags start with '--'; see --help)");
            }
            throw startup_error("", "unexpected argument '" + std::string(arg) +
                                        "': only --flags are accepted (see --help)");
        }
        const std::size_t eq = arg.find('=');
        const std::string_view name = arg.substr(2, eq == std::string_view::npos ? arg.npos : eq - 2);
        parsed_flag flag;
        flag.text = "--" + std::string(name);
        flag.builtin = find_builtin(name);
        if (flag.builtin == nullptr) {
            const auto it =
                std::find_if(app.begin(), app.end(), [&](const app_option& o) { return o.name == name; });
            flag.app = it == app.end() ? nullptr : &*it;
        }
        if (flag.builtin == nullptr && flag.app == nullptr) {
            std::string hint = detail::did_you_mean(flag.text, known_views);
            throw startup_error(flag.text,
                                "unknown flag" + (hint.empty() ? std::string(" (see --help)") : hint));
        }
        if (flag.builtin != nullptr && flag.builtin->action == flag_action::help) {
            if (eq != std::string_view::npos) {
                throw startup_error(flag.text, "takes no value");
            }
        } else if (eq != std::string_view::npos) {
            flag.value = arg.substr(eq + 1);
        } else if (i + 1 < argc && argv[i + 1] != nullptr &&
                   !std::string_view(argv[i + 1]).starts_with("--")) {
            // A following "--flag" is not taken as the value: "--listen --io-threads 4" is a
            // forgotten value, and a value that really starts with "--" can use "--flag=value".
            flag.value = argv[++i];
        } else {
            throw startup_error(flag.text,
                                "missing value: " + flag.text + " VALUE or " + flag.text + "=VALUE");
        }
        out.push_back(std::move(flag));
    }
    return out;
}

std::string_view env_value(std::span<const char* const> environment, std::string_view name) {
    std::string_view found;
    for (const char* entry : environment) {
        if (entry == nullptr) {
            continue;
        }
        const std::string_view text(entry);
        if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=') {
            found = text.substr(name.size() + 1);
        }
    }
    return found;
}

void apply_flag(command_line& result, const parsed_flag& flag) {
    const std::string from = "from " + flag.text;
    if (flag.app != nullptr) {
        *flag.app->target = std::string(flag.value);
        if (flag.app->given != nullptr) {
            *flag.app->given = true;
        }
        return;
    }
    switch (flag.builtin->action) {
    case flag_action::set_key:
        detail::set_from_text(result.cfg, key_of(*flag.builtin), flag.value, from);
        return;
    case flag_action::set_any: {
        const std::size_t eq = flag.value.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            throw startup_error(flag.text, "expected KEY=VALUE, got '" + std::string(flag.value) + "'");
        }
        const std::string_view name = flag.value.substr(0, eq);
        const key_spec* key = detail::find_config_key(name);
        if (key == nullptr) {
            throw startup_error(std::string(name), "unknown configuration key" +
                                                       detail::did_you_mean_key(name) + " (" + from + ")");
        }
        detail::set_from_text(result.cfg, *key, flag.value.substr(eq + 1), from);
        return;
    }
    case flag_action::config_file:
    case flag_action::help:
        return; // handled before the flags are applied
    }
}

} // namespace

command_line parse_command_line(int argc, const char* const* argv, std::span<const char* const> environment,
                                std::span<const app_option> app_options, std::string_view program_summary) {
    check_app_options(app_options);
    command_line result;
    result.usage = build_usage(detail::program_name(argc, argv), program_summary, app_options);

    // --help wins over everything else on the line: someone asking for help should get it even
    // while the rest of the line (or the environment) is still wrong.
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg(argv[i] == nullptr ? "" : argv[i]);
        if (arg == "--help" || arg == "-h") {
            result.help = true;
            return result;
        }
    }

    const std::vector<parsed_flag> flags = tokenize(argc, argv, app_options);

    std::string config_path;
    std::string config_source = "SLUICE_CONFIG";
    for (const parsed_flag& f : flags) {
        if (f.builtin != nullptr && f.builtin->action == flag_action::config_file) {
            if (f.value.empty()) {
                throw startup_error(f.text, "expects a file path, got ''");
            }
            // One file: a second would silently replace the first (keys that are in only one
            // of them would then depend on the order), so it is refused.
            if (!config_path.empty()) {
                throw startup_error(f.text, "given twice ('" + config_path + "', then '" +
                                                std::string(f.value) +
                                                "'): one configuration file only; --set adds keys");
            }
            config_path = f.value;
            config_source = f.text;
        }
    }
    if (config_path.empty()) {
        config_path = env_value(environment, "SLUICE_CONFIG");
    }
    if (!config_path.empty()) {
        try {
            apply_config_file(result.cfg, config_path);
        } catch (const startup_error& e) {
            if (!e.key().empty()) {
                throw;
            }
            // Which setting named the file is part of the answer when the file is wrong.
            throw startup_error("", std::string(e.what()) + " (config file from " + config_source + ")");
        }
    }
    apply_config_env(result.cfg, environment);
    for (const parsed_flag& f : flags) {
        apply_flag(result, f);
    }
    validate_config(result.cfg);
    return result;
}

} // namespace sluice
