#include "server/backend_selection.h"

#include <string>

#include <sluice/error.h>

namespace sluice::detail {

const io::backend& select_backend(std::string_view name, const io::driver_options& probe_options,
                                  const logger& log) {
    const auto all = io::registered_backends();
    if (name == "auto") {
        std::string passed;
        for (const io::backend* b : all) {
            if (b->traits.connection_per_thread) {
                continue;
            }
            std::string why = b->probe(probe_options);
            if (why.empty()) {
                log.info("backend auto: chose {}{}{}", b->name, passed.empty() ? "" : "; passed over ",
                         passed);
                return *b;
            }
            if (!passed.empty()) {
                passed += "; ";
            }
            passed += std::string(b->name) + " (" + why + ")";
        }
        throw startup_error("backend", "auto: no reactor backend can run here: " + passed);
    }
    for (const io::backend* b : all) {
        if (b->name == name) {
            std::string why = b->probe(probe_options);
            if (!why.empty()) {
                throw startup_error("backend", std::string(name) + " cannot run here: " + why);
            }
            return *b;
        }
    }
    std::string known;
    for (const io::backend* b : all) {
        known += std::string(b->name) + ", ";
    }
    known += "auto";
    throw startup_error("backend", "unknown backend \"" + std::string(name) + "\" (known: " + known + ")");
}

} // namespace sluice::detail
