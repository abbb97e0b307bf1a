// Fuzz target: the configuration pipeline (TOML, SLUICE_* environment, command line). Any
// input must end in a config or a startup_error with a message; anything else (another
// exception, a crash, a sanitizer report) aborts. A config that was accepted must also pass
// validate_config(), and describe_config() of it must read back as the same config (the
// text the server prints must be a file it accepts).
//
// Input: a TOML document, then optionally a line "--- env" and one NAME=value per line,
// then optionally a line "--- argv" and one argument per line. The file that --config or
// SLUICE_CONFIG names is always the TOML part (an in-memory file), never a real path.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/config.h>
#include <sluice/error.h>

namespace {

[[noreturn]] void violation(const std::string& what) {
    std::fprintf(stderr, "config_fuzz: %s\n", what.c_str());
    std::abort();
}

std::vector<std::string> lines(std::string_view text) {
    std::vector<std::string> out;
    while (!text.empty()) {
        const std::size_t nl = text.find('\n');
        out.emplace_back(text.substr(0, nl));
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    }
    return out;
}

// startup_error is the one way a configuration may be refused, and it must say something.
template <class F>
bool accepted(F&& f) {
    try {
        f();
        return true;
    } catch (const sluice::startup_error& e) {
        if (std::string_view(e.what()).empty()) {
            violation("startup_error without a message");
        }
        return false;
    }
}

void check_accepted(const sluice::config& cfg) {
    try {
        sluice::validate_config(cfg);
    } catch (const sluice::startup_error& e) {
        violation(std::string("accepted, yet validate_config refuses it: ") + e.what());
    }
    const std::string text = sluice::describe_config(cfg);
    sluice::config again;
    try {
        sluice::apply_config_toml(again, text, "describe_config");
    } catch (const sluice::startup_error& e) {
        violation(std::string("describe_config is not a valid file: ") + e.what() + "\n" + text);
    }
    if (sluice::describe_config(again) != text) {
        violation("describe_config does not read back the same:\n" + text + "---\n" +
                  sluice::describe_config(again));
    }
}

// An in-memory file with the TOML part, for --config and SLUICE_CONFIG.
struct memory_file {
    int fd = -1;
    std::string path;
    explicit memory_file(std::string_view content) {
        fd = memfd_create("fuzz.toml", MFD_CLOEXEC);
        if (fd < 0 || write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
            violation("memfd");
        }
        path = "/proc/self/fd/" + std::to_string(fd);
    }
    ~memory_file() { close(fd); }
    memory_file(const memory_file&) = delete;
    memory_file& operator=(const memory_file&) = delete;
};

void run_one(std::string_view input) {
    std::string_view toml = input;
    std::string_view env_text;
    std::string_view argv_text;
    if (const std::size_t a = toml.find("--- argv\n"); a != std::string_view::npos) {
        argv_text = toml.substr(a + 9);
        toml = toml.substr(0, a);
    }
    if (const std::size_t e = toml.find("--- env\n"); e != std::string_view::npos) {
        env_text = toml.substr(e + 8);
        toml = toml.substr(0, e);
    }

    sluice::config from_file;
    if (accepted([&] { sluice::apply_config_toml(from_file, toml, "fuzz.toml"); })) {
        if (accepted([&] { sluice::validate_config(from_file); })) {
            check_accepted(from_file);
        }
    } else if (sluice::describe_config(from_file) != sluice::describe_config(sluice::config{})) {
        violation("a refused file changed the config"); // all of the file or none of it
    }

    memory_file file(toml);
    std::vector<std::string> env = lines(env_text);
    for (std::string& e : env) {
        if (e.starts_with("SLUICE_CONFIG=")) {
            e = "SLUICE_CONFIG=" + file.path;
        }
    }
    std::vector<const char*> env_ptrs;
    for (const std::string& e : env) {
        env_ptrs.push_back(e.c_str());
    }

    sluice::config from_env;
    if (accepted([&] { sluice::apply_config_env(from_env, env_ptrs); }) &&
        accepted([&] { sluice::validate_config(from_env); })) {
        check_accepted(from_env);
    }

    std::vector<std::string> args = lines(argv_text);
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i].starts_with("--config=")) {
            args[i] = "--config=" + file.path;
        } else if (args[i] == "--config" && i + 1 < args.size() && !args[i + 1].starts_with("--")) {
            args[++i] = file.path;
        }
    }
    std::vector<const char*> argv{"sluice-fuzz"};
    for (const std::string& a : args) {
        argv.push_back(a.c_str());
    }
    std::string upstream;
    const sluice::app_option app[] = {{"upstream", "URL", "where to forward", &upstream}};
    sluice::command_line cl;
    if (accepted([&] {
            cl =
                sluice::parse_command_line(static_cast<int>(argv.size()), argv.data(), env_ptrs, app, "fuzz");
        }) &&
        !cl.help) {
        check_accepted(cl.cfg);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    run_one({reinterpret_cast<const char*>(data), size});
    return 0;
}
