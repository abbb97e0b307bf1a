#include "app_main.h"

#include <cstdio>
#include <exception>

#include <sluice/error.h>

namespace apps {

int run_app(const char* name, const std::function<int()>& body) {
    try {
        return body();
    } catch (const sluice::startup_error& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
        return 1;
    }
}

} // namespace apps
