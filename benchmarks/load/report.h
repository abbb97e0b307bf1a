// Prints a summary as JMeter's Summary Report (text), one JSON object, or CSV (header + row).
#pragma once

#include <ostream>
#include <string>

#include "options.h"
#include "summary.h"

namespace sluice::load {

void print_report(std::ostream& out, const summary& s, const load_options& o);

} // namespace sluice::load
