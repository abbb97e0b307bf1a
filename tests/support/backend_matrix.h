// The conformance matrix: every registered backend × {inline, pool}, as a GoogleTest value
// parameter. A backend whose probe() says it cannot run on this kernel is skipped with that
// reason; everything else a running backend lacks is a failure (STYLE.md rule 6).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/backend.h>
#include <sluice/config.h>

#include "support/background.h"
#include "support/context_box.h"
#include "support/event_recorder.h"
#include "support/test_client.h"
#include "support/test_server.h"

namespace sluice::test {

/// What the connections of a row speak: the same cases run over plaintext and over TLS.
enum class wire { plain, tls };

struct backend_param {
    std::string backend;
    dispatch_mode dispatch = dispatch_mode::inline_io;
    sluice::test::wire wire = wire::plain;
};

void PrintTo(const backend_param& p, std::ostream* os);

/// Every registered backend × {inline, pool} × {plain, tls}.
std::vector<backend_param> backend_matrix();
/// The TLS rows of the matrix, for a suite about what only TLS has.
std::vector<backend_param> tls_backend_matrix();
/// One backend's rows of the matrix, for a suite about what only that backend has.
std::vector<backend_param> backend_matrix_of(std::string_view backend);
/// "epoll_inline", "blocking_pool_tls": the suffix of each test's name.
std::string backend_param_name(const ::testing::TestParamInfo<backend_param>& info);
/// The registered backend of that name, or null.
const io::backend* find_backend(std::string_view name) noexcept;
/// Why the backend cannot run here: its probe's answer, or "not registered"; "" when it can.
std::string backend_unavailable_reason(std::string_view name);

/// The fixture of the conformance suites. Handlers and listeners may capture `this`: its
/// members outlive the server, which TearDown stops before anything else is destroyed.
class backend_test : public ::testing::TestWithParam<backend_param> {
protected:
    void SetUp() override;
    void TearDown() override;

    test_server& srv() noexcept { return *server_; }
    /// The backend runs one connection per thread (blocking): a suspended request keeps it.
    bool connection_per_thread() const noexcept;
    bool pool_dispatch() const noexcept { return GetParam().dispatch == dispatch_mode::pool; }
    bool over_tls() const noexcept { return GetParam().wire == wire::tls; }
    /// A further server for this row (backend, dispatch, and TLS on the {tls} rows), for cases
    /// with more than one (a restart hands the port over to a second server).
    std::unique_ptr<test_server> make_server() const;
    /// Sends GET target on a fresh connection to srv() and returns its response (or fails the
    /// test).
    std::optional<http_response> fetch(std::string_view target);

    std::unique_ptr<test_server> server_;
    background bg_;
    context_box contexts_;
    event_recorder events_;
};

} // namespace sluice::test

/// Instantiates a backend_test-derived suite over the matrix.
#define SLUICE_BACKEND_SUITE(suite)                                                                          \
    INSTANTIATE_TEST_SUITE_P(backends, suite, ::testing::ValuesIn(::sluice::test::backend_matrix()),         \
                             ::sluice::test::backend_param_name)

/// Instantiates a TLS suite over the TLS rows. Its prefix is tls_backends/, not backends/: the
/// TSan preset runs these and leaves out the other suites' {tls} rows (CMakePresets.json).
#define SLUICE_TLS_BACKEND_SUITE(suite)                                                                      \
    INSTANTIATE_TEST_SUITE_P(tls_backends, suite, ::testing::ValuesIn(::sluice::test::tls_backend_matrix()), \
                             ::sluice::test::backend_param_name)

/// Instantiates a suite over one backend's rows (a feature of that backend alone, such as the
/// blocking runtime's connection threads): no row of another backend runs it to be skipped.
#define SLUICE_BACKEND_SUITE_OF(suite, backend)                                                              \
    INSTANTIATE_TEST_SUITE_P(backends, suite,                                                                \
                             ::testing::ValuesIn(::sluice::test::backend_matrix_of(backend)),                \
                             ::sluice::test::backend_param_name)
