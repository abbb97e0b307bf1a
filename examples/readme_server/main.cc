// README.md, "A server in a few lines" (tests/install checks that it builds against an
// installed sluice and answers; tests/e2e/readme_server_test.cc, what it does with --help and
// bad input).
#include <sluice/sluice.h>

int main(int argc, char** argv) {
    return sluice::run_main(argc, argv, [](const sluice::config& cfg) {
        sluice::server srv(cfg);
        srv.get("/users/{id}", [](sluice::exchange& ex) {
            ex.response().json(R"({"id":")" + std::string(*ex.request().path_param("id")) + R"("})");
        });
        srv.get("/slow", [](sluice::exchange& ex) {
            auto ctx = ex.start_async(std::chrono::seconds(5)); // suspend: the thread is free again
            ex.executor().post_after(std::chrono::seconds(3), [ctx]() mutable {
                ctx.complete(sluice::response(200).text("done")); // from any thread, exactly once
            });
        });
        srv.run_until_signal();
    }); // --help, and bad input as one line naming the key with exit status 2
}
