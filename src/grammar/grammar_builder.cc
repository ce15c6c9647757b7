#include "grammar/grammar_builder.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace kvault {

namespace {

uint64_t ElementKey(const Element& e) {
  return (uint64_t{static_cast<uint8_t>(e.kind)} << 32) | e.arg;
}

struct AlternativeHash {
  size_t operator()(const Alternative& alt) const {
    uint64_t h = 1469598103934665603ull;
    for (const Element& e : alt) h = (h ^ ElementKey(e)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

struct AlternativeEqual {
  bool operator()(const Alternative& a, const Alternative& b) const {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const Element& x, const Element& y) {
                        return ElementKey(x) == ElementKey(y);
                      });
  }
};

}  // namespace

std::string PosPrefix(SourcePos pos) {
  if (pos.line == 0) return "grammar: ";
  return "grammar:" + std::to_string(pos.line) + ":" +
         std::to_string(pos.column) + ": ";
}

uint32_t GrammarBuilder::RuleId(std::string_view name, SourcePos used_at) {
  auto [it, inserted] =
      ids_.try_emplace(std::string(name), static_cast<uint32_t>(rules_.size()));
  if (inserted) {
    rules_.push_back(Rule{std::string(name), {}, false, used_at});
  }
  return it->second;
}

Status GrammarBuilder::Define(uint32_t id, std::vector<Alternative> alts,
                              SourcePos at) {
  Rule& rule = rules_[id];
  if (rule.defined) {
    return InvalidArgumentError(PosPrefix(at) + "rule '" + rule.name +
                                "' is defined twice (first at " +
                                std::to_string(rule.pos.line) + ":" +
                                std::to_string(rule.pos.column) + ")");
  }
  rule.defined = true;
  rule.pos = at;
  ++defined_count_;
  return SetGenerated(id, std::move(alts));
}

uint32_t GrammarBuilder::NewGenerated(std::string_view base, SourcePos at) {
  const int n = ++generated_count_[std::string(base)];
  rules_.push_back(
      Rule{std::string(base) + "_" + std::to_string(n), {}, true, at});
  return static_cast<uint32_t>(rules_.size() - 1);
}

Status GrammarBuilder::SetGenerated(uint32_t id,
                                    std::vector<Alternative> alts) {
  for (const Alternative& alt : alts) element_count_ += alt.size() + 1;
  if (element_count_ > kMaxElements) {
    return InvalidArgumentError(
        PosPrefix(rules_[id].pos) + "grammar too large: more than " +
        std::to_string(kMaxElements) + " elements after expanding repetitions");
  }
  rules_[id].alts = std::move(alts);
  return Status::Ok();
}

uint32_t GrammarBuilder::AddClass(CharClass c) {
  auto [it, inserted] = class_ids_.try_emplace(
      c.ToString(), static_cast<uint32_t>(classes_.size()));
  if (inserted) classes_.push_back(std::move(c));
  return it->second;
}

std::vector<bool> GrammarBuilder::NullableRules() const {
  // Linear worklist: each alternative made only of rule references counts
  // the references not yet known nullable; at zero its rule is nullable.
  std::vector<bool> nullable(rules_.size(), false);
  std::vector<size_t> pending;                           // per alternative
  std::vector<uint32_t> owner;                           // alternative -> rule
  std::vector<std::vector<size_t>> uses(rules_.size());  // rule -> alts
  std::vector<uint32_t> ready;
  for (uint32_t r = 0; r < rules_.size(); ++r) {
    for (const Alternative& alt : rules_[r].alts) {
      const bool refs_only = std::all_of(
          alt.begin(), alt.end(),
          [](const Element& e) { return e.kind == ElementKind::kRuleRef; });
      if (!refs_only) continue;
      const size_t id = pending.size();
      pending.push_back(alt.size());
      owner.push_back(r);
      for (const Element& e : alt) uses[e.arg].push_back(id);
      if (alt.empty()) ready.push_back(r);
    }
  }
  while (!ready.empty()) {
    const uint32_t r = ready.back();
    ready.pop_back();
    if (nullable[r]) continue;
    nullable[r] = true;
    for (size_t id : uses[r]) {
      if (--pending[id] == 0) ready.push_back(owner[id]);
    }
  }
  return nullable;
}

Status GrammarBuilder::CheckLeftRecursion() {
  const std::vector<bool> nullable = NullableRules();
  // Edge r -> s: s can be entered at the left edge of r, before any input.
  std::vector<std::vector<uint32_t>> left(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const Alternative& alt : rules_[r].alts) {
      for (const Element& e : alt) {
        if (e.kind != ElementKind::kRuleRef) break;
        left[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
    }
  }
  // Iterative DFS (hostile grammars may nest deeply) looking for a cycle.
  enum : uint8_t { kNew, kOpen, kDone };
  std::vector<uint8_t> color(rules_.size(), kNew);
  std::vector<std::pair<uint32_t, size_t>> path;  // rule, next edge
  for (uint32_t start = 0; start < rules_.size(); ++start) {
    KV_RETURN_IF_ERROR(Poll());
    if (color[start] != kNew) continue;
    path.push_back({start, 0});
    color[start] = kOpen;
    while (!path.empty()) {
      auto& [rule, next] = path.back();
      if (next == left[rule].size()) {
        color[rule] = kDone;
        path.pop_back();
        continue;
      }
      const uint32_t to = left[rule][next++];
      if (color[to] == kNew) {
        color[to] = kOpen;
        path.push_back({to, 0});
      } else if (color[to] == kOpen) {
        std::string cycle;
        size_t i = 0;
        while (path[i].first != to) ++i;
        const Rule* named = nullptr;
        for (; i < path.size(); ++i) {
          cycle += rules_[path[i].first].name + " -> ";
          if (named == nullptr) named = &rules_[path[i].first];
        }
        cycle += rules_[to].name;
        return InvalidArgumentError(
            PosPrefix(named->pos) + "rule '" + named->name +
            "' is left-recursive (" + cycle +
            "); a stack-based matcher cannot run left recursion: rewrite it "
            "with repetition, e.g. expr ::= term (\"+\" term)*");
      }
    }
  }
  return Status::Ok();
}

StatusOr<Grammar> GrammarBuilder::Finish(std::string_view root) && {
  if (defined_count_ == 0) {
    return InvalidArgumentError("grammar: the grammar is empty (no rules)");
  }
  for (const Rule& rule : rules_) {
    if (!rule.defined) {
      return InvalidArgumentError(PosPrefix(rule.pos) + "undefined rule '" +
                                  rule.name + "'");
    }
  }
  auto root_it = ids_.find(std::string(root));
  if (root_it == ids_.end()) {
    return InvalidArgumentError("grammar: missing '" + std::string(root) +
                                "' rule (the start rule)");
  }
  KV_RETURN_IF_ERROR(CheckLeftRecursion());
  KV_RETURN_IF_ERROR(LeftFactor());
  Grammar g;
  g.root_ = root_it->second;
  g.classes_ = std::move(classes_);
  g.elements_.reserve(element_count_);
  for (Rule& rule : rules_) {
    KV_RETURN_IF_ERROR(Poll());
    g.names_.push_back(std::move(rule.name));
    std::vector<uint32_t> starts;
    for (const Alternative& alt : rule.alts) {
      starts.push_back(static_cast<uint32_t>(g.elements_.size()));
      g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
      g.elements_.push_back(Element{ElementKind::kEnd, 0});
    }
    g.alts_.push_back(std::move(starts));
  }
  return g;
}

Status GrammarBuilder::LeftFactor() {
  // Rules added while factoring are visited too (their tails may share
  // prefixes again).
  for (uint32_t id = 0; id < rules_.size(); ++id) {
    KV_RETURN_IF_ERROR(Poll());
    std::vector<Alternative> alts = FactorAlternatives(id);
    rules_[id].alts = std::move(alts);
  }
  return Status::Ok();
}

std::vector<Alternative> GrammarBuilder::FactorAlternatives(uint32_t id) {
  std::vector<Alternative> alts = std::move(rules_[id].alts);
  if (alts.size() < 2) return alts;
  // Identical alternatives match the same text: keep the first of each.
  if (alts.size() <= 8) {
    for (size_t i = 1; i < alts.size();) {
      const bool repeated =
          std::any_of(alts.begin(), alts.begin() + static_cast<ptrdiff_t>(i),
                      [&](const Alternative& a) {
                        return AlternativeEqual()(a, alts[i]);
                      });
      if (repeated) {
        alts.erase(alts.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  } else {
    std::unordered_set<Alternative, AlternativeHash, AlternativeEqual> seen;
    std::erase_if(alts, [&seen](const Alternative& a) {
      return !seen.insert(a).second;
    });
  }
  // Groups of alternatives by first element, in order of first use.
  std::vector<std::vector<size_t>> groups;
  std::unordered_map<uint64_t, size_t> group_of;
  std::vector<size_t> singles;  // alternatives that stay as they are
  for (size_t i = 0; i < alts.size(); ++i) {
    if (alts[i].empty()) {
      groups.push_back({i});
      continue;
    }
    auto [it, inserted] =
        group_of.try_emplace(ElementKey(alts[i][0]), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  if (groups.size() == alts.size()) return alts;  // nothing shared
  std::vector<Alternative> out;
  out.reserve(groups.size());
  for (const std::vector<size_t>& group : groups) {
    if (group.size() == 1) {
      out.push_back(std::move(alts[group[0]]));
      continue;
    }
    const Element first = alts[group[0]][0];
    std::vector<Alternative> tails;
    tails.reserve(group.size());
    for (size_t i : group) {
      tails.emplace_back(alts[i].begin() + 1, alts[i].end());
    }
    const std::string base = rules_[id].name;
    const uint32_t tail_rule = NewGenerated(base, rules_[id].pos);
    rules_[tail_rule].alts = std::move(tails);
    out.push_back({first, Element{ElementKind::kRuleRef, tail_rule}});
  }
  return out;
}

}  // namespace kvault
