// run_main(): the command line, --help, and the exit status of a failed start.
#include <cstdio>
#include <exception>
#include <string>

#include <sluice/error.h>
#include <sluice/run_main.h>

namespace sluice {
namespace {

std::string program_name(int argc, const char* const* argv) {
    if (argc < 1 || argv == nullptr || argv[0] == nullptr || *argv[0] == '\0') {
        return "sluice";
    }
    const std::string_view path = argv[0];
    const std::size_t slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

} // namespace

int run_main(int argc, const char* const* argv, const std::function<void(const config&)>& body,
             std::span<const app_option> app_options, std::string_view program_summary) {
    const std::string name = program_name(argc, argv);
    try {
        const command_line cl =
            parse_command_line(argc, argv, process_environment(), app_options, program_summary);
        if (cl.help) {
            std::fputs(cl.usage.c_str(), stdout);
            return 0;
        }
        body(cl.cfg);
        return 0;
    } catch (const startup_error& e) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
        return 1;
    } catch (...) {
        std::fprintf(stderr, "%s: an exception that is not a std::exception\n", name.c_str());
        return 1;
    }
}

} // namespace sluice
