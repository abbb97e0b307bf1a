// run_main(): the command line, --help, and the exit status of a failed start.
#include <cstdio>
#include <exception>
#include <string>

#include <sluice/error.h>
#include <sluice/run_main.h>

#include "program_name.h"

namespace sluice {
int run_main(int argc, const char* const* argv, const std::function<void(const config&)>& body,
             std::span<const app_option> app_options, std::string_view program_summary) {
    const std::string name = detail::program_name(argc, argv);
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
