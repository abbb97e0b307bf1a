// Choosing a backend by name (Seastar's selector: probe, prefer, explain).
#pragma once

#include <string_view>

#include <sluice/backend.h>
#include <sluice/log.h>

namespace sluice::detail {

/// The backend named by `name`, probed: "auto" takes the first registered backend that
/// probes well, except those with connection_per_thread (auto means a reactor), and logs
/// its choice and why the others were passed over. A named backend that cannot run here
/// is a startup_error("backend") saying why; an unknown name lists the known ones.
const io::backend& select_backend(std::string_view name, const io::driver_options& probe_options,
                                  const logger& log);

} // namespace sluice::detail
