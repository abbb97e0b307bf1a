// The router: precedence (literal > parameter > tail), backtracking, 404 vs 405 with Allow,
// HEAD served by GET, the methods of "OPTIONS *", pattern validation, duplicates, parameter
// capture, many routes.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sluice/router.h>

namespace sluice {
namespace {

// A handler that says which route it is; the tests never call it.
struct tagged {
    int id;
    void operator()(exchange& /*unused*/) const {}
};

/// Which route matched (its tag), or -1.
int tag_of(const router::match_result& r) {
    if (r.target == nullptr) {
        return -1;
    }
    const tagged* t = r.target->target<tagged>();
    return t == nullptr ? -2 : t->id;
}

class router_test : public ::testing::Test {
protected:
    int match(std::string_view method, std::string_view path) {
        last_ = r_.match(method, path, params_);
        return tag_of(last_);
    }
    std::string param(std::string_view name) const {
        for (const auto& p : params_) {
            if (p.name == name) {
                return std::string(p.value);
            }
        }
        return "<absent>";
    }

    router r_;
    std::vector<router::param> params_;
    router::match_result last_;
};

TEST_F(router_test, literal_beats_parameter_whatever_the_order_added) {
    r_.add("GET", "/users/{id}", tagged{1});
    r_.add("GET", "/users/me", tagged{2});
    EXPECT_EQ(match("GET", "/users/me"), 2);
    EXPECT_TRUE(params_.empty());
    EXPECT_EQ(match("GET", "/users/42"), 1);
    EXPECT_EQ(param("id"), "42");
    EXPECT_EQ(last_.status, 0);
}

TEST_F(router_test, parameter_beats_tail) {
    r_.add("GET", "/files/{path...}", tagged{1});
    r_.add("GET", "/files/{name}", tagged{2});
    EXPECT_EQ(match("GET", "/files/a.txt"), 2);
    EXPECT_EQ(param("name"), "a.txt");
    EXPECT_EQ(match("GET", "/files/dir/a.txt"), 1);
    EXPECT_EQ(param("path"), "dir/a.txt");
    // A parameter needs a non-empty segment; the tail takes the empty rest.
    EXPECT_EQ(match("GET", "/files/"), 1);
    EXPECT_EQ(param("path"), "");
}

TEST_F(router_test, backs_up_when_a_literal_branch_dead_ends) {
    r_.add("GET", "/a/b/c", tagged{1});
    r_.add("GET", "/a/{x}/d", tagged{2});
    r_.add("GET", "/a/{rest...}", tagged{3});
    EXPECT_EQ(match("GET", "/a/b/c"), 1);
    EXPECT_EQ(match("GET", "/a/b/d"), 2);
    EXPECT_EQ(param("x"), "b");
    EXPECT_EQ(params_.size(), 1U) << "the literal branch's attempt must leave no parameter behind";
    EXPECT_EQ(match("GET", "/a/b/e"), 3);
    EXPECT_EQ(param("rest"), "b/e");
    EXPECT_EQ(params_.size(), 1U);
}

TEST_F(router_test, tails) {
    r_.add("GET", "/static/{path...}", tagged{1});
    EXPECT_EQ(match("GET", "/static/css/site.css"), 1);
    EXPECT_EQ(param("path"), "css/site.css");
    EXPECT_EQ(match("GET", "/static/a//b/"), 1);
    EXPECT_EQ(param("path"), "a//b/");
    EXPECT_EQ(match("GET", "/static/"), 1);
    EXPECT_EQ(param("path"), "");
    // The tail is a segment after "/static/": "/static" itself has none.
    EXPECT_EQ(match("GET", "/static"), -1);
    EXPECT_EQ(last_.status, 404);
}

TEST_F(router_test, catch_all_at_the_root_yields_to_everything_else) {
    r_.add("GET", "/{all...}", tagged{1});
    r_.add("GET", "/", tagged{2});
    r_.add("GET", "/api/{v}", tagged{3});
    EXPECT_EQ(match("GET", "/"), 2);
    EXPECT_EQ(match("GET", "/api/v1"), 3);
    EXPECT_EQ(match("GET", "/api/v1/x"), 1);
    EXPECT_EQ(param("all"), "api/v1/x");
    EXPECT_EQ(match("GET", "/index.html"), 1);
}

TEST_F(router_test, trailing_slash_is_a_different_route) {
    r_.add("GET", "/users", tagged{1});
    r_.add("GET", "/users/", tagged{2});
    EXPECT_EQ(match("GET", "/users"), 1);
    EXPECT_EQ(match("GET", "/users/"), 2);
    EXPECT_EQ(match("GET", "/users//"), -1);
}

TEST_F(router_test, not_found) {
    r_.add("GET", "/users/{id}", tagged{1});
    params_.push_back({"stale", "value"});
    EXPECT_EQ(match("GET", "/nope"), -1);
    EXPECT_EQ(last_.status, 404);
    EXPECT_TRUE(last_.allow.empty());
    EXPECT_TRUE(params_.empty());
    EXPECT_EQ(match("GET", "/users"), -1);
    EXPECT_EQ(match("GET", "/users//42"), -1);
    EXPECT_EQ(match("GET", "/users/42/more"), -1);
    // Not an origin-form path at all.
    for (const char* path : {"", "*", "users/42", "http://host/users/42"}) {
        EXPECT_EQ(match("GET", path), -1) << path;
        EXPECT_EQ(last_.status, 404) << path;
    }
}

TEST_F(router_test, method_not_allowed_lists_allow_sorted_with_head) {
    r_.add("POST", "/items", tagged{1});
    r_.add("GET", "/items", tagged{2});
    r_.add("PUT", "/items", tagged{3});
    r_.add("DELETE", "/items", tagged{4});
    EXPECT_EQ(match("PATCH", "/items"), -1);
    EXPECT_EQ(last_.status, 405);
    EXPECT_EQ(last_.allow, "DELETE, GET, HEAD, POST, PUT");
    EXPECT_TRUE(params_.empty());
}

TEST_F(router_test, allow_without_get_has_no_head) {
    r_.add("POST", "/submit", tagged{1});
    EXPECT_EQ(match("HEAD", "/submit"), -1);
    EXPECT_EQ(last_.status, 405);
    EXPECT_EQ(last_.allow, "POST");
}

TEST_F(router_test, allow_is_the_union_of_every_matching_template) {
    r_.add("GET", "/users/me", tagged{1});
    r_.add("DELETE", "/users/{id}", tagged{2});
    r_.add("GET", "/users/{id}", tagged{3});
    r_.add("PATCH", "/users/{rest...}", tagged{4});
    // DELETE /users/me is served by the parameter route: the literal has no DELETE.
    EXPECT_EQ(match("DELETE", "/users/me"), 2);
    EXPECT_EQ(param("id"), "me");
    EXPECT_EQ(match("PATCH", "/users/me"), 4);
    EXPECT_EQ(match("PUT", "/users/me"), -1);
    EXPECT_EQ(last_.status, 405);
    EXPECT_EQ(last_.allow, "DELETE, GET, HEAD, PATCH");
}

TEST_F(router_test, head_is_served_by_get_unless_a_head_route_exists) {
    r_.add("GET", "/a", tagged{1});
    r_.add("GET", "/b", tagged{2});
    r_.add("HEAD", "/b", tagged{3});
    EXPECT_EQ(match("HEAD", "/a"), 1);
    EXPECT_EQ(match("HEAD", "/b"), 3);
    EXPECT_EQ(match("GET", "/b"), 2);
    EXPECT_EQ(match("PUT", "/b"), -1);
    EXPECT_EQ(last_.allow, "GET, HEAD");
}

TEST_F(router_test, methods_are_case_sensitive_tokens) {
    r_.add("get", "/x", tagged{1});
    r_.add("M-SEARCH", "/x", tagged{2});
    EXPECT_EQ(match("GET", "/x"), -1);
    EXPECT_EQ(last_.status, 405);
    EXPECT_EQ(last_.allow, "M-SEARCH, get");
    EXPECT_EQ(match("get", "/x"), 1);
    EXPECT_EQ(match("M-SEARCH", "/x"), 2);
}

TEST_F(router_test, parameters_are_captured_raw_in_order) {
    r_.add("GET", "/orgs/{org}/repos/{repo}/issues/{n}", tagged{1});
    EXPECT_EQ(match("GET", "/orgs/acme/repos/road%20runner/issues/7"), 1);
    ASSERT_EQ(params_.size(), 3U);
    EXPECT_EQ(params_[0].name, "org");
    EXPECT_EQ(params_[0].value, "acme");
    EXPECT_EQ(params_[1].name, "repo");
    EXPECT_EQ(params_[1].value, "road%20runner");
    EXPECT_EQ(params_[2].name, "n");
    EXPECT_EQ(params_[2].value, "7");
}

TEST_F(router_test, parameter_names_belong_to_the_route) {
    r_.add("GET", "/u/{id}", tagged{1});
    r_.add("POST", "/u/{uid}", tagged{2});
    EXPECT_EQ(match("GET", "/u/5"), 1);
    EXPECT_EQ(param("id"), "5");
    EXPECT_EQ(match("POST", "/u/6"), 2);
    EXPECT_EQ(param("uid"), "6");
    EXPECT_EQ(param("id"), "<absent>");
}

TEST_F(router_test, values_view_the_path_and_names_outlive_later_changes) {
    r_.add("GET", "/u/{id}", tagged{1});
    const std::string path = "/u/abc";
    ASSERT_EQ(match("GET", path), 1);
    EXPECT_EQ(params_[0].value.data(), path.data() + 3);
    const std::string_view name = params_[0].name;
    const handler* target = last_.target;
    for (int i = 0; i < 100; ++i) {
        r_.add("GET", "/more/" + std::to_string(i) + "/{p" + std::to_string(i) + "}", tagged{100 + i});
    }
    router moved = std::move(r_);
    EXPECT_EQ(name, "id");
    const auto again = moved.match("GET", path, params_);
    EXPECT_EQ(again.target, target);
    EXPECT_EQ(params_[0].name.data(), name.data());
}

TEST_F(router_test, a_moved_from_router_can_be_used_again) {
    r_.add("GET", "/a", tagged{1});
    router other = std::move(r_);
    EXPECT_EQ(match("GET", "/a"), -1); // NOLINT(bugprone-use-after-move): testing exactly that
    r_.add("GET", "/b", tagged{2});
    EXPECT_EQ(match("GET", "/b"), 2);
    EXPECT_EQ(tag_of(other.match("GET", "/a", params_)), 1);
}

TEST_F(router_test, matching_reuses_the_params_capacity) {
    r_.add("GET", "/a/{x}/b/{y}", tagged{1});
    params_.reserve(4);
    const auto* data = params_.data();
    for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(match("GET", "/a/1/b/2"), 1);
        ASSERT_EQ(match("GET", "/nothing"), -1);
    }
    EXPECT_EQ(params_.data(), data);
    EXPECT_EQ(params_.capacity(), 4U);
}

class router_invalid_pattern : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(router_invalid_pattern, is_rejected) {
    router r;
    const auto& [method, pattern] = GetParam();
    EXPECT_THROW(r.add(method, pattern, tagged{1}), std::invalid_argument) << method << " " << pattern;
    // Nothing half-added: the router still answers 404 everywhere.
    std::vector<router::param> params;
    EXPECT_EQ(r.match("GET", "/", params).status, 404);
}

INSTANTIATE_TEST_SUITE_P(
    patterns, router_invalid_pattern,
    ::testing::Values(std::pair{"GET", ""}, std::pair{"GET", "users"}, std::pair{"GET", "{id}"},
                      std::pair{"GET", "/users/{}"}, std::pair{"GET", "/files/{...}"},
                      std::pair{"GET", "/a/{x}/{x}"}, std::pair{"GET", "/a/{x}/b/{x...}"},
                      std::pair{"GET", "/a/{x...}/b"}, std::pair{"GET", "/a/{x...}/"},
                      std::pair{"GET", "/a/{x"}, std::pair{"GET", "/a/x}"}, std::pair{"GET", "/a/{x}y"},
                      std::pair{"GET", "/a/pre{x}"}, std::pair{"GET", "/a/{{x}}"},
                      std::pair{"GET", "/a/{x{y}"}, std::pair{"GET", "/a//b"}, std::pair{"GET", "//"},
                      std::pair{"GET", "/a/{1x}"}, std::pair{"GET", "/a/{x y}"}, std::pair{"GET", "/a/{x-y}"},
                      std::pair{"GET", "/a?b=1"}, std::pair{"GET", "/a#frag"}, std::pair{"GET", "/a b"},
                      std::pair{"", "/a"}, std::pair{"GE T", "/a"}, std::pair{"GET\r\n", "/a"},
                      std::pair{"(GET)", "/a"}, std::pair{"GET/1", "/a"}));

TEST(router, valid_unusual_patterns_are_accepted) {
    router r;
    EXPECT_NO_THROW(r.add("GET", "/", tagged{1}));
    EXPECT_NO_THROW(r.add("GET", "/a/{x}/", tagged{2}));
    EXPECT_NO_THROW(r.add("GET", "/{_private9}", tagged{3}));
    EXPECT_NO_THROW(r.add("GET", "/~user/file.tar.gz", tagged{4}));
    EXPECT_NO_THROW(r.add("GET", "/%7Euser", tagged{5}));
    EXPECT_NO_THROW(r.add("GET", "/{rest...}", tagged{6}));
}

TEST(router, empty_handler_is_rejected) {
    router r;
    EXPECT_THROW(r.add("GET", "/a", handler{}), std::invalid_argument);
}

TEST(router, duplicate_routes_are_rejected) {
    router r;
    r.add("GET", "/users/{id}", tagged{1});
    EXPECT_THROW(r.add("GET", "/users/{id}", tagged{2}), std::invalid_argument);
    // Parameter names aside, it is the same route.
    EXPECT_THROW(r.add("GET", "/users/{uid}", tagged{3}), std::invalid_argument);
    try {
        r.add("GET", "/users/{uid}", tagged{3});
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("/users/{id}"), std::string::npos) << e.what();
    }
    // Another method, or another shape, is another route.
    EXPECT_NO_THROW(r.add("POST", "/users/{uid}", tagged{4}));
    EXPECT_NO_THROW(r.add("GET", "/users/{id...}", tagged{5}));
    EXPECT_NO_THROW(r.add("GET", "/users/me", tagged{6}));
    EXPECT_NO_THROW(r.add("HEAD", "/users/{id}", tagged{7}));
    // The first route is still the one that answers.
    std::vector<router::param> params;
    EXPECT_EQ(tag_of(r.match("GET", "/users/9", params)), 1);
}

TEST(router, methods_lists_every_routed_method_once_with_head_for_get) {
    router r;
    EXPECT_EQ(r.methods(), "");
    r.add("PUT", "/a", tagged{1});
    r.add("GET", "/a", tagged{2});
    r.add("GET", "/b/{id}", tagged{3});
    r.add("DELETE", "/c", tagged{4});
    r.add("HEAD", "/d", tagged{5});
    EXPECT_EQ(r.methods(), "DELETE, GET, HEAD, PUT");
}

TEST(router, many_routes) {
    router r;
    constexpr int n = 500;
    for (int i = 0; i < n; ++i) {
        const std::string base = "/svc" + std::to_string(i);
        r.add("GET", base + "/items/{id}", tagged{i * 10 + 1});
        r.add("POST", base + "/items", tagged{i * 10 + 2});
        r.add("GET", base + "/static", tagged{i * 10 + 3});
        r.add("GET", base + "/files/{path...}", tagged{i * 10 + 4});
    }
    std::vector<router::param> params;
    params.reserve(4);
    for (int i = 0; i < n; ++i) {
        const std::string base = "/svc" + std::to_string(i);
        const std::string id = "item" + std::to_string(i);
        const std::string path = base + "/items/" + id; // params view into it
        ASSERT_EQ(tag_of(r.match("GET", path, params)), i * 10 + 1);
        ASSERT_EQ(params.size(), 1U);
        EXPECT_EQ(params[0].value, id);
        EXPECT_EQ(tag_of(r.match("POST", base + "/items", params)), i * 10 + 2);
        EXPECT_EQ(tag_of(r.match("GET", base + "/static", params)), i * 10 + 3);
        EXPECT_EQ(tag_of(r.match("HEAD", base + "/files/a/b", params)), i * 10 + 4);
        const auto wrong = r.match("DELETE", base + "/items", params);
        EXPECT_EQ(wrong.status, 405);
        EXPECT_EQ(wrong.allow, "POST");
    }
    EXPECT_EQ(r.match("GET", "/svc" + std::to_string(n) + "/static", params).status, 404);
}

} // namespace
} // namespace sluice
