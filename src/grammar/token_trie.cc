#include "grammar/token_trie.h"

#include <algorithm>

namespace kvault {

TokenTrie::TokenTrie(const std::vector<std::string>& tokens,
                     const std::function<bool(uint32_t)>& exclude)
    : vocab_size_(tokens.size()) {
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty() || (exclude && exclude(id))) continue;
    ids.push_back(id);
  }
  // Sorted byte strings put every subtree in one contiguous range.
  std::sort(ids.begin(), ids.end(),
            [&](uint32_t a, uint32_t b) { return tokens[a] < tokens[b]; });
  Build(tokens, ids, 0, ids.size(), 0);
}

uint32_t TokenTrie::Build(const std::vector<std::string>& tokens,
                          const std::vector<uint32_t>& ids, size_t begin,
                          size_t end, size_t depth) {
  const uint32_t node = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  nodes_[node].first_token = static_cast<uint32_t>(token_ids_.size());
  size_t i = begin;
  for (; i < end && tokens[ids[i]].size() == depth; ++i) {
    token_ids_.push_back(ids[i]);
  }
  nodes_[node].num_tokens =
      static_cast<uint32_t>(token_ids_.size()) - nodes_[node].first_token;
  // Group the rest by their byte at `depth`; reserve the edges first so a
  // node's edges stay contiguous while the children are built.
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t g = i; g < end;) {
    const char b = tokens[ids[g]][depth];
    size_t h = g;
    while (h < end && tokens[ids[h]][depth] == b) ++h;
    groups.push_back({g, h});
    g = h;
  }
  const uint32_t first_edge = static_cast<uint32_t>(edges_.size());
  nodes_[node].first_edge = first_edge;
  nodes_[node].num_edges = static_cast<uint32_t>(groups.size());
  edges_.resize(edges_.size() + groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto [g, h] = groups[k];
    const uint8_t b = static_cast<uint8_t>(tokens[ids[g]][depth]);
    const uint32_t child = Build(tokens, ids, g, h, depth + 1);
    edges_[first_edge + k] = Edge{b, child};
  }
  return node;
}

}  // namespace kvault
