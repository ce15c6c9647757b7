#include "grammar/grammar_builder.h"

#include <utility>

namespace kvault {

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
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : rules_[r].alts) {
        bool all = true;
        for (const Element& e : alt) {
          if (e.kind != ElementKind::kRuleRef || !nullable[e.arg]) {
            all = false;
            break;
          }
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Status GrammarBuilder::CheckLeftRecursion() const {
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
  Grammar g;
  g.root_ = root_it->second;
  g.classes_ = std::move(classes_);
  g.elements_.reserve(element_count_);
  for (Rule& rule : rules_) {
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

}  // namespace kvault
