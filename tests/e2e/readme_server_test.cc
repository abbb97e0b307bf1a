// The README's "server in a few lines" (examples/readme_server), run as a program: what it
// does with --help and with bad input must be what every sluice program does, since users
// start from it: the usage and exit 0, or one line naming the key and exit 2, never an abort.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "support/process.h"

#ifdef SLUICE_README_SERVER_BIN // built with SLUICE_BUILD_EXAMPLES (the default)
namespace {

using sluice::test::process_result;

process_result run_readme_server(const std::vector<std::string>& args,
                                 const std::vector<std::string>& env_extra = {}) {
    std::vector<std::string> argv{SLUICE_README_SERVER_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return sluice::test::run_process(argv, std::chrono::milliseconds(5000), {env_extra});
}

TEST(readme_server, help_prints_the_usage_and_exits_0_without_serving) {
    const auto r = run_readme_server({"--listen", "127.0.0.1:0", "--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("--backend"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("limits.max_body_bytes"), std::string::npos) << r.out;
}

TEST(readme_server, a_bad_value_is_one_line_naming_the_key_and_exit_2) {
    for (const auto& [args, env] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
             {{"--listen", "127.0.0.1:0", "--set", "limits.max_body_bytes=-1"}, {}},
             {{"--listen", "127.0.0.1:0"}, {"SLUICE_LIMITS_MAX_BODY_BYTES=x"}}}) {
        const auto r = run_readme_server(args, env);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_EQ(r.err.rfind("readme_server: limits.max_body_bytes: ", 0), 0u) << r.err;
        EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
    }
}

TEST(readme_server, a_listen_address_it_cannot_bind_is_a_startup_error_naming_listen) {
    const auto r = run_readme_server({"--listen", "192.0.2.1:1"}); // TEST-NET-1: not on this host
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("\nreadme_server: listen: cannot listen on 192.0.2.1:1"), std::string::npos)
        << r.err; // after the log's line of the chosen backend
}

} // namespace
#endif
