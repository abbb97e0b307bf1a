// The TOML configuration file. Tables map to dotted key names ([limits] max_body_bytes →
// "limits.max_body_bytes"); every value goes through the key table in config.cc.

#include <toml++/toml.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/config.h>
#include <sluice/error.h>

#include "config_keys.h"
#include "regular_file.h"

namespace sluice {
namespace {

using detail::key_spec;
using detail::value_type;

// "in /etc/sluice.toml:12" (toml++ counts lines from 1; a region it does not know is line 0).
std::string where(std::string_view origin, const toml::source_region& region) {
    std::string out = "in ";
    out += origin.empty() ? std::string_view("config") : origin;
    if (region.begin.line != 0) {
        out += ':';
        out += std::to_string(region.begin.line);
    }
    return out;
}

std::string_view type_name(const toml::node& node) {
    switch (node.type()) {
    case toml::node_type::table:
        return "a table";
    case toml::node_type::array:
        return "an array";
    case toml::node_type::string:
        return "a string";
    case toml::node_type::integer:
        return "an integer";
    case toml::node_type::floating_point:
        return "a float";
    case toml::node_type::boolean:
        return "a boolean";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
        return "a date or time";
    case toml::node_type::none:
        break;
    }
    return "nothing";
}

struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

void apply_value(config& cfg, const key_spec& key, const toml::node& node, std::string_view origin) {
    const std::string at = where(origin, node.source());
    if (key.type == value_type::integer) {
        if (const auto* v = node.as_integer()) {
            detail::set_from_integer(cfg, key, v->get(), at);
            return;
        }
        throw startup_error(std::string(key.name),
                            "expected an integer, got " + std::string(type_name(node)) + " (" + at + ")");
    }
    if (const auto* v = node.as_string()) {
        detail::set_from_text(cfg, key, v->get(), at);
        return;
    }
    if (const auto* v = node.as_boolean(); v != nullptr && key.value_hint == "true|false") {
        // A yes/no key (tls.ktls) takes a TOML boolean; its text form is "true" / "false".
        detail::set_from_text(cfg, key, v->get() ? "true" : "false", at);
        return;
    }
    const bool yes_no = key.value_hint == "true|false";
    throw startup_error(std::string(key.name),
                        std::string(yes_no ? "expected true or false" : "expected a string") + ", got " +
                            std::string(type_name(node)) + " (" + at + ")");
}

std::string sni_string(const toml::node& node, const std::string& name, std::string_view origin) {
    const auto* v = node.as_string();
    if (v == nullptr) {
        throw startup_error(name, "expected a string, got " + std::string(type_name(node)) + " (" +
                                      where(origin, node.source()) + ")");
    }
    return v->get();
}

// [[tls.sni]] tables: an array of { names, cert, key }. They are not in the key table (there
// is no environment or command-line form of a list of tables); each error names the entry,
// "tls.sni[1].cert", counting from 0.
void apply_sni(config& cfg, const toml::node& node, std::string_view origin) {
    const toml::array* entries = node.as_array();
    if (entries == nullptr || !entries->is_array_of_tables()) {
        throw startup_error("tls.sni", "expected an array of tables ([[tls.sni]]), got " +
                                           std::string(type_name(node)) + " (" +
                                           where(origin, node.source()) + ")");
    }
    for (const toml::node& entry : *entries) {
        const std::string at = "tls.sni[" + std::to_string(cfg.tls.sni.size()) + "]";
        tls_sni_config sni;
        for (const auto& [toml_key, value] : *entry.as_table()) {
            const std::string field(toml_key.str());
            const std::string name = at + "." + field;
            if (field == "cert") {
                sni.cert = sni_string(value, name, origin);
            } else if (field == "key") {
                sni.key = sni_string(value, name, origin);
            } else if (field == "names") {
                const toml::array* names = value.as_array();
                if (names == nullptr) {
                    sni.names.push_back(sni_string(value, name, origin)); // one name as a string
                    continue;
                }
                for (const toml::node& n : *names) {
                    sni.names.push_back(sni_string(n, name, origin));
                }
            } else {
                throw startup_error(name, "unknown key in a [[tls.sni]] entry (names, cert, key) (" +
                                              where(origin, toml_key.source()) + ")");
            }
        }
        cfg.tls.sni.push_back(std::move(sni));
    }
}

void apply_table(config& cfg, const toml::table& table, const std::string& prefix, std::string_view origin) {
    for (const auto& [toml_key, node] : table) {
        const std::string name = prefix + std::string(toml_key.str());
        if (name == "tls.sni") {
            apply_sni(cfg, node, origin);
        } else if (const key_spec* key = detail::find_config_key(name)) {
            apply_value(cfg, *key, node, origin);
        } else if (detail::is_config_table(name)) {
            const toml::table* sub = node.as_table();
            if (sub == nullptr) {
                throw startup_error(name, "expected a table of keys, got " + std::string(type_name(node)) +
                                              " (" + where(origin, node.source()) + ")");
            }
            apply_table(cfg, *sub, name + ".", origin);
        } else {
            throw startup_error(name, "unknown configuration key" + detail::did_you_mean_key(name) + " (" +
                                          where(origin, toml_key.source()) + ")");
        }
    }
}

// TOML keys, table headers and values other than strings are ASCII, so a byte above 0x7f
// anywhere but in a string or a comment is a syntax error. toml++ 3.3 does not always say so:
// on some such bytes where a key belongs it reaches TOML_UNREACHABLE (undefined behaviour;
// found by tests/fuzz/config). This scan finds them first. Returns {line, column} counted from
// 1, or {0, 0} when there are none. Strings are followed only as far as where they end: what
// is wrong inside them is left to toml++. A quote opens a string only where TOML lets one
// begin (at the start of a line, after '=', '[', '{', ',' or '.'): elsewhere, as in
// `x = 1.e"é"`, toml++ may not read it as a string, so what follows is not one either.
struct text_position {
    std::size_t line = 0;
    std::size_t column = 0;
};

text_position first_non_ascii_outside_strings(std::string_view text) {
    enum class in { code, comment, basic, literal, ml_basic, ml_literal };
    in state = in::code;
    char before = '\n'; // the last byte of code on this line other than a space or tab
    std::size_t line = 1;
    std::size_t line_start = 0;
    const auto starts = [&text](std::size_t i, std::string_view what) {
        return text.substr(i).starts_with(what);
    };
    // A multi-line string may end in up to two quotes of its own before its delimiter.
    const auto close_multi_line = [&text](std::size_t i, char quote) {
        std::size_t end = i + 3;
        for (int extra = 0; extra < 2 && end < text.size() && text[end] == quote; ++extra) {
            ++end;
        }
        return end;
    };
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
            line_start = i + 1;
            before = '\n';
            if (state == in::comment || state == in::basic || state == in::literal) {
                state = in::code; // a single-line string cut by a newline: toml++ reports it
            }
            ++i;
            continue;
        }
        switch (state) {
        case in::code:
            if (static_cast<unsigned char>(c) > 0x7f) {
                return {line, i - line_start + 1};
            }
            if (c == ' ' || c == '\t') {
                break;
            }
            if ((c == '"' || c == '\'') &&
                std::string_view("\n=[{,.").find(before) == std::string_view::npos) {
                before = c; // not where a string begins: a stray quote
                break;
            }
            before = c;
            if (c == '#') {
                state = in::comment;
            } else if (starts(i, "\"\"\"")) {
                state = in::ml_basic;
                i += 3;
                continue;
            } else if (starts(i, "'''")) {
                state = in::ml_literal;
                i += 3;
                continue;
            } else if (c == '"') {
                state = in::basic;
            } else if (c == '\'') {
                state = in::literal;
            }
            break;
        case in::comment:
            break;
        case in::basic:
        case in::ml_basic:
            if (c == '\\') {
                // An escaped byte cannot end the string; a newline after the backslash (a
                // line-ending backslash) is left to the loop, which counts lines.
                i += (i + 1 < text.size() && text[i + 1] != '\n') ? std::size_t{2} : std::size_t{1};
                continue;
            }
            if (state == in::basic && c == '"') {
                state = in::code;
            } else if (state == in::ml_basic && starts(i, "\"\"\"")) {
                state = in::code;
                i = close_multi_line(i, '"');
                continue;
            }
            break;
        case in::literal:
            if (c == '\'') {
                state = in::code;
            }
            break;
        case in::ml_literal:
            if (starts(i, "'''")) {
                state = in::code;
                i = close_multi_line(i, '\'');
                continue;
            }
            break;
        }
        ++i;
    }
    return {};
}

} // namespace

void apply_config_toml(config& cfg, std::string_view toml_text, std::string_view origin) {
    const std::string_view name = origin.empty() ? std::string_view("config") : origin;
    if (const text_position at = first_non_ascii_outside_strings(toml_text); at.line != 0) {
        throw startup_error("", std::string(name) + ":" + std::to_string(at.line) + ":" +
                                    std::to_string(at.column) +
                                    ": TOML syntax error: a byte above 0x7F outside a string or comment "
                                    "(keys are ASCII; quote them)");
    }
    toml::table root;
    try {
        root = toml::parse(toml_text, origin);
    } catch (const toml::parse_error& e) {
        // No key is to blame for a syntax error; the location is what the user needs.
        const auto& begin = e.source().begin;
        throw startup_error("", std::string(name) + ":" + std::to_string(begin.line) + ":" +
                                    std::to_string(begin.column) +
                                    ": TOML syntax error: " + std::string(e.description()));
    }
    // Apply to a copy, so that a bad file leaves cfg as it was: all of the file or none of it.
    config updated = cfg;
    apply_table(updated, root, "", origin);
    cfg = std::move(updated);
}

void apply_config_file(config& cfg, const std::string& path) {
    // stdio rather than iostreams: fopen and fread set errno, so the message can say why.
    const auto cannot_read = [&path] {
        return startup_error("", "cannot read config file '" + path +
                                     "': " + std::generic_category().message(errno));
    };
    // Opened without waiting, and only a regular file: a FIFO would block open() until a
    // writer came (regular_file.h).
    const detail::opened_file opened = detail::open_regular_file(path);
    if (opened.fd < 0) {
        throw startup_error("", "cannot read config file '" + path + "': " +
                                    (opened.error != 0 ? std::generic_category().message(opened.error)
                                                       : std::string("not a regular file")));
    }
    errno = 0;
    const std::unique_ptr<std::FILE, file_closer> file(::fdopen(opened.fd, "rb"));
    if (!file) {
        ::close(opened.fd);
        throw cannot_read();
    }
    std::string text;
    std::array<char, 4096> chunk{};
    std::size_t n = 0;
    while ((n = std::fread(chunk.data(), 1, chunk.size(), file.get())) > 0) {
        text.append(chunk.data(), n);
    }
    if (std::ferror(file.get()) != 0) {
        throw cannot_read(); // a directory, an I/O error
    }
    apply_config_toml(cfg, text, path);
}

} // namespace sluice
