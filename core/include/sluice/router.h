// Method + path-template routing.
//
// Templates are '/'-separated segments; a segment is a literal ("users") or a
// parameter ("{id}") matching one non-empty segment; a last segment "{name...}"
// matches the rest of the path (possibly empty, slashes included). Literal segments
// win over parameters at the same depth, so "/users/me" beats "/users/{id}".
// Matching is on the raw (not decoded) path; parameter values are decoded by the
// server before the handler runs. A GET route also serves HEAD unless a HEAD route
// exists. A path that matches no template is 404; one that matches a template with
// no route for the method is 405 with an Allow header. "OPTIONS *" is answered by the server with
// methods() (RFC 9110 §9.3.7).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/handler.h>

namespace sluice {

class router {
public:
    struct param {
        std::string_view name;  ///< owned by the router
        std::string_view value; ///< a view into the matched path, not decoded
    };

    struct match_result {
        const handler* target = nullptr; ///< set when a route matched
        std::size_t route = 0;           ///< when matched: the route's index in the order of add()
        int status = 0;                  ///< 0 when matched, else 404 or 405
        std::string allow;               ///< for 405: "GET, HEAD, POST"
    };

    router();
    ~router();
    router(router&&) noexcept;
    router& operator=(router&&) noexcept;

    /// Adds a route. Throws std::invalid_argument on a malformed method or template, or when the
    /// same method and template (parameter names aside) was added before.
    void add(std::string_view method, std::string_view pattern, handler h);

    /// Finds the route for method and raw path; params receives the captured parameters
    /// (cleared first). Allocation-free when it matches, for paths without parameters beyond
    /// params' capacity.
    match_result match(std::string_view method, std::string_view path, std::vector<param>& params) const;

    /// Every method some route serves (HEAD with GET), as an Allow value ("GET, HEAD, POST"): the
    /// server's answer to "OPTIONS *". Empty when there is no route.
    std::string methods() const;

    /// Routes added so far; a match's `route` is below this.
    std::size_t size() const noexcept;
    /// The template a route was added with ("/users/{id}"), by index; "" past the end.
    std::string_view pattern(std::size_t route) const noexcept;

private:
    struct node;
    std::unique_ptr<node> root_;
};

} // namespace sluice
