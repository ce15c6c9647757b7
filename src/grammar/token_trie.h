// TokenTrie: the vocabulary's token byte strings as a prefix tree, so that
// the matcher walks a prefix shared by many tokens once and drops a whole
// subtree as soon as the grammar rejects it.
#ifndef KVAULT_GRAMMAR_TOKEN_TRIE_H_
#define KVAULT_GRAMMAR_TOKEN_TRIE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace kvault {

class TokenTrie {
 public:
  struct Edge {
    uint8_t byte;
    uint32_t child;
  };
  static constexpr uint32_t kRoot = 0;

  // Builds the trie of `tokens` (index = token id). Empty tokens and those
  // for which `exclude(id)` is true (special/control tokens, which the
  // caller handles itself) are left out and never marked allowed.
  explicit TokenTrie(const std::vector<std::string>& tokens,
                     const std::function<bool(uint32_t)>& exclude = nullptr);

  // Returns the vocabulary size given at construction (the mask size).
  size_t vocab_size() const { return vocab_size_; }
  // Returns the number of trie nodes (the root included).
  size_t num_nodes() const { return nodes_.size(); }
  // Returns the outgoing edges of `node`, sorted by byte.
  std::span<const Edge> edges(uint32_t node) const {
    const Node& n = nodes_[node];
    return {edges_.data() + n.first_edge, n.num_edges};
  }
  // Returns the ids of the tokens whose bytes end exactly at `node`.
  std::span<const uint32_t> tokens(uint32_t node) const {
    const Node& n = nodes_[node];
    return {token_ids_.data() + n.first_token, n.num_tokens};
  }

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint32_t num_edges = 0;
    uint32_t first_token = 0;
    uint32_t num_tokens = 0;
  };
  void Build(const std::vector<std::string>& tokens,
             const std::vector<uint32_t>& ids);

  size_t vocab_size_;
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<uint32_t> token_ids_;
};

}  // namespace kvault

#endif  // KVAULT_GRAMMAR_TOKEN_TRIE_H_
