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
  Build(tokens, ids);
}

void TokenTrie::Build(const std::vector<std::string>& tokens,
                      const std::vector<uint32_t>& ids) {
  // Iterative (a long token must not mean deep recursion). A work item is
  // a node still to create: the sorted range of ids below it, its depth
  // and the parent edge to point at it. Nodes are created in the order the
  // matcher walks them (preorder), which keeps that walk cache-friendly.
  struct Work {
    size_t begin, end, depth;
    size_t parent_edge;  // SIZE_MAX for the root
  };
  std::vector<Work> todo = {{0, ids.size(), 0, SIZE_MAX}};
  std::vector<Work> children;
  while (!todo.empty()) {
    const Work w = todo.back();
    todo.pop_back();
    const uint32_t id = static_cast<uint32_t>(nodes_.size());
    if (w.parent_edge != SIZE_MAX) edges_[w.parent_edge].child = id;
    Node node;
    node.first_token = static_cast<uint32_t>(token_ids_.size());
    size_t i = w.begin;
    for (; i < w.end && tokens[ids[i]].size() == w.depth; ++i) {
      token_ids_.push_back(ids[i]);
    }
    node.num_tokens = static_cast<uint32_t>(i - w.begin);
    node.first_edge = static_cast<uint32_t>(edges_.size());
    // The rest share the prefix; group them by their byte at `depth`.
    children.clear();
    while (i < w.end) {
      const char b = tokens[ids[i]][w.depth];
      size_t j = i;
      while (j < w.end && tokens[ids[j]][w.depth] == b) ++j;
      children.push_back({i, j, w.depth + 1, edges_.size()});
      edges_.push_back(Edge{static_cast<uint8_t>(b), 0});
      i = j;
    }
    node.num_edges = static_cast<uint32_t>(children.size());
    nodes_.push_back(node);
    todo.insert(todo.end(), children.rbegin(), children.rend());
  }
}

}  // namespace kvault
