// A segment tree of path templates.
//
// Each node is one template segment; its children are literal segments (sorted, binary-searched),
// at most one parameter "{x}" and at most one tail "{x...}". Routes (method → handler) hang on the
// node where their template ends. Matching walks the raw path segment by segment, trying literal,
// then parameter, then tail, and backs up when a branch dead-ends, so "/a/b/c" and "/a/{x}/d" both
// match what they should. The first route found in that order wins: literal beats parameter beats
// tail, at every depth, which is the precedence users expect (Go 1.22's ServeMux and httprouter
// agree on "more specific wins"; we pick by position, which needs no conflict rules).
//
// Parameter names live on the route, not on the node, because "/u/{id}" and "/u/{uid}" share a
// node but may name their parameter differently for different methods. Routes and their names
// are held by pointer, so the handler pointers and name views match() hands out stay valid for
// the router's lifetime, also when routes are added later or the router is moved.

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <sluice/router.h>

#include "http/tokens.h"

namespace sluice {
namespace {

using http::is_tchar;

struct route_entry {
    std::string method;
    handler target;
    std::vector<std::string> param_names;
    std::string pattern; ///< as added, for error messages and metrics
    std::size_t id = 0;  ///< position in the order of add()
};

struct tree_node {
    struct literal_child {
        std::string segment;
        std::unique_ptr<tree_node> child;
    };
    std::vector<literal_child> literals; ///< sorted by segment
    std::unique_ptr<tree_node> param;
    std::unique_ptr<tree_node> tail;
    std::vector<std::unique_ptr<route_entry>> routes;

    const tree_node* find_literal(std::string_view segment) const noexcept {
        const auto it =
            std::lower_bound(literals.begin(), literals.end(), segment,
                             [](const literal_child& c, std::string_view s) { return c.segment < s; });
        return it != literals.end() && it->segment == segment ? it->child.get() : nullptr;
    }

    tree_node& literal(std::string_view segment) {
        auto it = std::lower_bound(literals.begin(), literals.end(), segment,
                                   [](const literal_child& c, std::string_view s) { return c.segment < s; });
        if (it == literals.end() || it->segment != segment) {
            it = literals.insert(it, literal_child{std::string(segment), std::make_unique<tree_node>()});
        }
        return *it->child;
    }

    const route_entry* route_for(std::string_view method) const noexcept {
        for (const auto& r : routes) {
            if (r->method == method) {
                return r.get();
            }
        }
        return nullptr;
    }
};

enum class segment_kind { literal, param, tail };

struct pattern_segment {
    segment_kind kind;
    std::string_view text; ///< the literal, or the parameter's name
};

[[noreturn]] void bad_pattern(std::string_view pattern, const std::string& why) {
    throw std::invalid_argument("route pattern '" + std::string(pattern) + "': " + why);
}

// RFC 9110 §5.6.2 tchar: a method is a token.
bool is_param_name(std::string_view name) noexcept {
    const auto word = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    return !name.empty() && !(name.front() >= '0' && name.front() <= '9') &&
           std::all_of(name.begin(), name.end(), word);
}

std::vector<pattern_segment> parse_pattern(std::string_view pattern) {
    if (pattern.empty() || pattern.front() != '/') {
        bad_pattern(pattern, "must start with '/'");
    }
    std::vector<pattern_segment> out;
    std::size_t pos = 1;
    while (true) {
        const std::size_t slash = pattern.find('/', pos);
        const bool last = slash == std::string_view::npos;
        const std::string_view seg = pattern.substr(pos, last ? std::string_view::npos : slash - pos);
        if (seg.empty() && !last) {
            // Only the final segment may be empty ("/" and "/users/"); "//" is a typo.
            bad_pattern(pattern, "empty segment ('//')");
        }
        if (seg.starts_with('{')) {
            if (!seg.ends_with('}') || seg.find_first_of("{}", 1) != seg.size() - 1) {
                bad_pattern(pattern, "unbalanced braces in '" + std::string(seg) +
                                         "' (a parameter is a whole segment: '{name}')");
            }
            std::string_view name = seg.substr(1, seg.size() - 2);
            segment_kind kind = segment_kind::param;
            if (name.ends_with("...")) {
                name.remove_suffix(3);
                kind = segment_kind::tail;
                if (!last) {
                    bad_pattern(pattern, "'{" + std::string(name) + "...}' must be the last segment");
                }
            }
            if (name.empty()) {
                bad_pattern(pattern, "empty parameter name");
            }
            if (!is_param_name(name)) {
                bad_pattern(pattern, "parameter name '" + std::string(name) +
                                         "' must be letters, digits and '_', not starting with a digit");
            }
            for (const pattern_segment& s : out) {
                if (s.kind != segment_kind::literal && s.text == name) {
                    bad_pattern(pattern, "parameter name '" + std::string(name) + "' used twice");
                }
            }
            out.push_back({kind, name});
        } else {
            if (seg.find('}') != std::string_view::npos || seg.find('{') != std::string_view::npos) {
                bad_pattern(pattern, "unbalanced braces in '" + std::string(seg) +
                                         "' (a parameter is a whole segment: '{name}')");
            }
            // The router matches the path without its query, raw as received: these never occur there.
            for (const char c : seg) {
                if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' || c == '#') {
                    bad_pattern(pattern, "character not allowed in a path segment");
                }
            }
            out.push_back({segment_kind::literal, seg});
        }
        if (last) {
            break;
        }
        pos = slash + 1;
    }
    return out;
}

/// Walks the tree along path[pos..] (pos is just past a '/') in precedence order and calls
/// visit(node) on every node where a template ends exactly at the end of the path, until visit
/// returns a route. Pushes one param per parameter or tail passed, pops them when backing up.
/// Recursion depth is bounded by the tree's depth, not by the path.
template <class Visit>
const route_entry* search(const tree_node& n, std::string_view path, std::size_t pos,
                          std::vector<router::param>& params, Visit& visit) {
    const std::size_t slash = path.find('/', pos);
    const bool last = slash == std::string_view::npos;
    const std::string_view seg = path.substr(pos, last ? std::string_view::npos : slash - pos);
    const auto descend = [&](const tree_node& child) -> const route_entry* {
        return last ? visit(child) : search(child, path, slash + 1, params, visit);
    };
    if (const tree_node* child = n.find_literal(seg)) {
        if (const route_entry* r = descend(*child)) {
            return r;
        }
    }
    if (n.param && !seg.empty()) {
        params.push_back({{}, seg});
        if (const route_entry* r = descend(*n.param)) {
            return r;
        }
        params.pop_back();
    }
    if (n.tail) {
        params.push_back({{}, path.substr(pos)});
        if (const route_entry* r = visit(*n.tail)) {
            return r;
        }
        params.pop_back();
    }
    return nullptr;
}

// An Allow field value (RFC 9110 §10.2.1): the methods, sorted, each once, comma-separated.
std::string allow_value(std::vector<std::string_view>& methods) {
    std::sort(methods.begin(), methods.end());
    methods.erase(std::unique(methods.begin(), methods.end()), methods.end());
    std::string value;
    for (const std::string_view m : methods) {
        if (!value.empty()) {
            value += ", ";
        }
        value += m;
    }
    return value;
}

} // namespace

struct router::node {
    tree_node tree;
    std::vector<const route_entry*> by_id; ///< every route, in the order of add()
};

router::router() : root_(std::make_unique<node>()) {}
router::~router() = default;
router::router(router&&) noexcept = default;
router& router::operator=(router&&) noexcept = default;

void router::add(std::string_view method, std::string_view pattern, handler h) {
    if (method.empty() || !std::all_of(method.begin(), method.end(), is_tchar)) {
        throw std::invalid_argument("route method '" + std::string(method) + "' is not an HTTP token");
    }
    if (!h) {
        throw std::invalid_argument("route " + std::string(method) + " " + std::string(pattern) +
                                    ": empty handler");
    }
    // Validate everything before touching the tree, so a rejected route leaves no trace.
    const std::vector<pattern_segment> segments = parse_pattern(pattern);
    if (!root_) {
        root_ = std::make_unique<node>(); // a moved-from router is usable again
    }
    tree_node* n = &root_->tree;
    std::vector<std::string> names;
    for (const pattern_segment& s : segments) {
        switch (s.kind) {
        case segment_kind::literal:
            n = &n->literal(s.text);
            break;
        case segment_kind::param:
        case segment_kind::tail: {
            auto& child = s.kind == segment_kind::param ? n->param : n->tail;
            if (!child) {
                child = std::make_unique<tree_node>();
            }
            n = child.get();
            names.emplace_back(s.text);
            break;
        }
        }
    }
    if (const route_entry* existing = n->route_for(method)) {
        throw std::invalid_argument("duplicate route " + std::string(method) + " " + std::string(pattern) +
                                    " (same as " + existing->method + " " + existing->pattern + ")");
    }
    root_->by_id.reserve(root_->by_id.size() + 1); // so that the push_back below cannot throw
    n->routes.push_back(std::make_unique<route_entry>(route_entry{
        std::string(method), std::move(h), std::move(names), std::string(pattern), root_->by_id.size()}));
    root_->by_id.push_back(n->routes.back().get());
}

std::size_t router::size() const noexcept {
    return root_ ? root_->by_id.size() : 0;
}

std::string_view router::pattern(std::size_t route) const noexcept {
    return root_ && route < root_->by_id.size() ? std::string_view(root_->by_id[route]->pattern)
                                                : std::string_view();
}

router::match_result router::match(std::string_view method, std::string_view path,
                                   std::vector<param>& params) const {
    match_result result;
    params.clear();
    if (!root_ || path.empty() || path.front() != '/') {
        result.status = 404;
        return result;
    }
    const bool head = method == "HEAD";
    auto for_method = [&](const tree_node& n) -> const route_entry* {
        const route_entry* r = n.route_for(method);
        // RFC 9110 §9.3.2: HEAD is GET without the body; the server drops the body.
        return r == nullptr && head ? n.route_for("GET") : r;
    };
    if (const route_entry* r = search(root_->tree, path, 1, params, for_method)) {
        for (std::size_t i = 0; i < params.size(); ++i) {
            params[i].name = r->param_names[i];
        }
        result.target = &r->target;
        result.route = r->id;
        return result;
    }

    // No route for this method. If any template matches the path it is 405, and Allow lists the
    // methods of every matching template (RFC 9110 §15.5.6), since each of them would succeed.
    std::vector<std::string_view> allowed; // allocated only for a 405: a 404 stays allocation-free
    bool path_matched = false;
    auto collect = [&](const tree_node& n) -> const route_entry* {
        for (const auto& r : n.routes) {
            if (allowed.empty()) {
                allowed.reserve(8);
            }
            path_matched = true;
            allowed.emplace_back(r->method);
            if (r->method == "GET") {
                allowed.emplace_back("HEAD");
            }
        }
        return nullptr; // keep walking: every matching template contributes
    };
    search(root_->tree, path, 1, params, collect);
    params.clear();
    if (!path_matched) {
        result.status = 404;
        return result;
    }
    result.status = 405;
    result.allow = allow_value(allowed);
    return result;
}

std::string router::methods() const {
    std::vector<std::string_view> all;
    if (root_) {
        for (const route_entry* r : root_->by_id) {
            all.emplace_back(r->method);
            if (r->method == "GET") {
                all.emplace_back("HEAD");
            }
        }
    }
    return allow_value(all);
}

} // namespace sluice
