// The one table of configuration keys, shared by the TOML file, the environment and
// the command line (config.cc, config_file.cc, command_line.cc). Private to the core.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include <sluice/config.h>

namespace sluice::detail {

enum class value_type { integer, text };

/// One configuration key. Integer keys carry an inclusive range and a store/load pair over
/// std::uint64_t; text keys carry a store that validates (and parses enums) and a load that
/// gives the text form back. Exactly one pair is set, according to `type`.
struct key_spec {
    std::string_view name; ///< canonical dotted name: "limits.max_body_bytes"
    value_type type = value_type::integer;
    std::uint64_t min = 0;
    std::uint64_t max = 0;
    std::string_view value_hint; ///< for usage text: "N", "HOST:PORT", "inline|pool"
    std::string_view help;       ///< one line; says what 0 means where 0 is allowed

    void (*store_integer)(config&, std::uint64_t) = nullptr;
    std::uint64_t (*load_integer)(const config&) = nullptr;
    /// Stores a valid value and returns ""; returns why the value is bad and leaves cfg alone.
    std::string (*store_text)(config&, std::string_view) = nullptr;
    std::string (*load_text)(const config&) = nullptr;
};

std::span<const key_spec> config_keys() noexcept;
const key_spec* find_config_key(std::string_view name) noexcept;

/// Whether `name` is a table of keys ("limits", "blocking", "tls").
bool is_config_table(std::string_view name) noexcept;

/// Why `name` cannot be a [[tls.sni]] host name, or "".
std::string check_sni_name(std::string_view name);

/// The environment variable of a key: "limits.max_body_bytes" → "SLUICE_LIMITS_MAX_BODY_BYTES".
std::string env_name(std::string_view key);

/// " (did you mean 'x'?)" for the closest of `candidates` to a misspelt name, or "".
std::string did_you_mean(std::string_view name, std::span<const std::string_view> candidates);
/// The same over the configuration keys.
std::string did_you_mean_key(std::string_view name);

/// Stores a value given as text (the environment, --set, a flag). `where` says where it came
/// from ("from SLUICE_IO_THREADS") and ends the error message. Throws startup_error naming the key.
void set_from_text(config& cfg, const key_spec& key, std::string_view value, std::string_view where);
/// Stores an integer given as a number (a TOML integer), range-checked the same way.
void set_from_integer(config& cfg, const key_spec& key, std::int64_t value, std::string_view where);

/// The value of a key as a TOML literal: 8192, "epoll".
std::string toml_value(const config& cfg, const key_spec& key);
/// The value of a key as plain text (for usage defaults): 8192, epoll.
std::string text_value(const config& cfg, const key_spec& key);

} // namespace sluice::detail
