#include "grammar/grammar.h"

#include <map>
#include <unordered_map>

namespace duet {

namespace {

Error grammar_error(std::string message) {
  Error e{std::move(message), "grammar"};
  return e;
}

}  // namespace

// Lowers parsed rules: literals to byte runs, classes to UTF-8 byte
// patterns, groups and repetitions to generated rules.
class GrammarBuilder {
  // An element before flattening: a byte set or a rule. (Members, not in
  // the anonymous namespace: GrammarBuilder is Grammar's friend by name.)
  struct Sym {
    bool rule;
    uint32_t arg;
  };
  using Alternative = std::vector<Sym>;

 public:
  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  Result<std::shared_ptr<const Grammar>> build(const std::vector<GbnfRule>& parsed) {
    for (const GbnfRule& r : parsed) {
      if (names_.count(r.name)) {
        // GBNF lets a rule be given in parts; later ones add alternatives.
        continue;
      }
      names_[r.name] = new_rule(r.name);
    }
    auto root = names_.find("root");
    if (root == names_.end()) return grammar_error("grammar has no 'root' rule");
    g_->root_ = root->second;
    for (const GbnfRule& r : parsed) {
      const uint32_t id = names_[r.name];
      if (r.body.kind == GbnfExpr::Kind::kAlt) {
        for (const GbnfExpr& a : r.body.items) {
          DUET_ASSIGN(Alternative alt, lower_seq(a, r.name));
          bodies_[id].push_back(std::move(alt));
        }
      } else {
        DUET_ASSIGN(Alternative alt, lower_seq(r.body, r.name));
        bodies_[id].push_back(std::move(alt));
      }
    }
    flatten();
    DUET_TRY(check_left_recursion());
    return std::shared_ptr<const Grammar>(std::move(g_));
  }

 private:
  uint32_t new_rule(std::string name) {
    g_->rules_.push_back({std::move(name), {}});
    bodies_.emplace_back();
    return static_cast<uint32_t>(g_->rules_.size() - 1);
  }

  uint32_t set_index(const ByteSet& s) {
    auto [it, fresh] = set_ids_.emplace(s, static_cast<uint32_t>(g_->byte_sets_.size()));
    if (fresh) g_->byte_sets_.push_back(s);
    return it->second;
  }

  Status count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > limits_.max_elements)
      return grammar_error("grammar expands to more than " + std::to_string(limits_.max_elements) +
                           " elements (repetition counts or the grammar are too large)");
    return {};
  }

  // A whole expression as one alternative (a group becomes a rule).
  Result<Alternative> lower_seq(const GbnfExpr& e, const std::string& owner) {
    Alternative out;
    DUET_TRY(lower_into(e, owner, out));
    return out;
  }

  Status lower_into(const GbnfExpr& e, const std::string& owner, Alternative& out) {
    switch (e.kind) {
      case GbnfExpr::Kind::kSeq:
        for (const GbnfExpr& item : e.items) DUET_TRY(lower_into(item, owner, out));
        return {};
      case GbnfExpr::Kind::kLiteral:
        DUET_TRY(count(e.text.size()));
        for (char c : e.text) {
          ByteSet s;
          s.add(static_cast<uint8_t>(c));
          out.push_back({false, set_index(s)});
        }
        return {};
      case GbnfExpr::Kind::kClass:
        return lower_class(e, owner, out);
      case GbnfExpr::Kind::kRef: {
        auto it = names_.find(e.text);
        if (it == names_.end())
          return grammar_error("grammar error at " + std::to_string(e.line) + ":" + std::to_string(e.col) +
                               ": rule '" + e.text + "' (used in '" + owner + "') is not defined");
        DUET_TRY(count(1));
        out.push_back({true, it->second});
        return {};
      }
      case GbnfExpr::Kind::kAlt: {
        const uint32_t id = new_rule(owner + "/group");
        for (const GbnfExpr& a : e.items) {
          DUET_ASSIGN(Alternative alt, lower_seq(a, owner));
          bodies_[id].push_back(std::move(alt));
        }
        DUET_TRY(count(1));
        out.push_back({true, id});
        return {};
      }
      case GbnfExpr::Kind::kRepeat:
        return lower_repeat(e, owner, out);
    }
    return {};
  }

  Status lower_class(const GbnfExpr& e, const std::string& owner, Alternative& out) {
    std::vector<CodeRange> ranges = normalize_ranges(e.ranges);
    if (e.negated) ranges = complement_ranges(ranges);
    if (ranges.empty()) return grammar_error("grammar error at " + std::to_string(e.line) + ":" +
                                             std::to_string(e.col) + ": character class matches nothing");
    if (ranges.back().second < 0x80) {  // ASCII only: one byte set
      ByteSet s;
      for (auto [lo, hi] : ranges) s.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
      DUET_TRY(count(1));
      out.push_back({false, set_index(s)});
      return {};
    }
    auto cached = class_rules_.find(ranges);
    uint32_t id;
    if (cached != class_rules_.end()) {
      id = cached->second;
    } else {
      id = new_rule(owner + "/class");
      for (const BytePattern& p : utf8_patterns(ranges)) {
        DUET_TRY(count(p.size() + 1));
        Alternative alt;
        for (const ByteSet& s : p) alt.push_back({false, set_index(s)});
        bodies_[id].push_back(std::move(alt));
      }
      class_rules_[ranges] = id;
    }
    DUET_TRY(count(1));
    out.push_back({true, id});
    return {};
  }

  // x{m,n}: m copies of x, then n-m nested optionals (each optional's tail
  // is its last element, so matching never deepens the stack); x{m,}: m
  // copies then a right-recursive star.
  Status lower_repeat(const GbnfExpr& e, const std::string& owner, Alternative& out) {
    DUET_ASSIGN(Alternative item, lower_seq(e.items[0], owner));
    if (item.size() != 1) {
      const uint32_t id = new_rule(owner + "/item");
      DUET_TRY(count(item.size() + 1));
      bodies_[id].push_back(std::move(item));
      item = {{true, id}};
    }
    const Sym x = item[0];
    DUET_TRY(count(static_cast<size_t>(e.min)));
    for (int i = 0; i < e.min; ++i) out.push_back(x);
    if (e.max < 0) {
      const uint32_t star = new_rule(owner + "/star");
      DUET_TRY(count(3));
      bodies_[star].push_back({x, {true, star}});
      bodies_[star].push_back({});
      out.push_back({true, star});
    } else if (e.max > e.min) {
      DUET_TRY(count(4 * static_cast<size_t>(e.max - e.min)));  // before building any of it
      uint32_t inner = 0;
      for (int k = 0; k < e.max - e.min; ++k) {
        const uint32_t opt = new_rule(owner + "/opt");
        if (k == 0)
          bodies_[opt].push_back({x});
        else
          bodies_[opt].push_back({x, {true, inner}});
        bodies_[opt].push_back({});
        inner = opt;
      }
      out.push_back({true, inner});
    }
    return {};
  }

  void flatten() {
    auto& els = g_->elements_;
    for (size_t r = 0; r < bodies_.size(); ++r) {
      for (const Alternative& alt : bodies_[r]) {
        g_->rules_[r].alts.push_back(static_cast<uint32_t>(els.size()));
        for (const Sym& s : alt)
          els.push_back({s.rule ? GrammarElement::kRule : GrammarElement::kBytes, s.arg});
        els.push_back({GrammarElement::kEnd, 0});
      }
    }
  }

  // A rule is left-recursive when it can reach itself through leftmost
  // references, counting the rules that can match nothing as transparent.
  Status check_left_recursion() {
    const auto& rules = g_->rules_;
    const auto& els = g_->elements_;
    std::vector<bool> nullable(rules.size(), false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < rules.size(); ++r) {
        if (nullable[r]) continue;
        for (uint32_t a : rules[r].alts) {
          uint32_t p = a;
          while (els[p].kind == GrammarElement::kRule && nullable[els[p].arg]) ++p;
          if (els[p].kind == GrammarElement::kEnd) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> left(rules.size());
    for (size_t r = 0; r < rules.size(); ++r)
      for (uint32_t a : rules[r].alts)
        for (uint32_t p = a; els[p].kind == GrammarElement::kRule; ++p) {
          left[r].push_back(els[p].arg);
          if (!nullable[els[p].arg]) break;
        }
    // Iterative DFS with colours; a grey target closes a cycle.
    std::vector<uint8_t> colour(rules.size(), 0);
    std::vector<uint32_t> path;
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t start = 0; start < rules.size(); ++start) {
      if (colour[start]) continue;
      stack.push_back({start, 0});
      colour[start] = 1;
      path.push_back(start);
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        if (i == left[r].size()) {
          colour[r] = 2;
          path.pop_back();
          stack.pop_back();
          continue;
        }
        const uint32_t t = left[r][i++];
        if (colour[t] == 1) return left_recursion_error(path, t);
        if (colour[t] == 0) {
          colour[t] = 1;
          path.push_back(t);
          stack.push_back({t, 0});
        }
      }
    }
    return {};
  }

  Error left_recursion_error(const std::vector<uint32_t>& path, uint32_t target) {
    std::string cycle;
    bool in = false;
    for (uint32_t r : path) {
      in = in || r == target;
      if (in) cycle += g_->rules_[r].name + " -> ";
    }
    cycle += g_->rules_[target].name;
    return grammar_error("grammar is left-recursive (" + cycle +
                         "); rewrite it right-recursive, or make the repeated part non-empty");
  }

  GrammarLimits limits_;
  std::unique_ptr<Grammar> g_ = std::make_unique<Grammar>();
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<std::vector<Alternative>> bodies_;
  std::map<ByteSet, uint32_t> set_ids_;
  std::map<std::vector<CodeRange>, uint32_t> class_rules_;
  size_t n_elements_ = 0;
};

Result<std::shared_ptr<const Grammar>> Grammar::from_gbnf(std::string_view text, const GrammarLimits& limits) {
  DUET_ASSIGN(std::vector<GbnfRule> parsed, parse_gbnf(text, limits.text));
  return GrammarBuilder(limits).build(parsed);
}

}  // namespace duet
