// The merge loop both tokenizer families share: a text is split into
// symbols (one UTF-8 character each, a doubly linked list), then the best
// adjacent pair is merged again and again. SentencePiece ranks a pair by its
// vocabulary score, byte-level BPE by its merge rank; everything else is the
// same, so it lives here once.
#ifndef KVAULT_MODEL_SYMBOL_MERGE_H_
#define KVAULT_MODEL_SYMBOL_MERGE_H_

#include <algorithm>
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "model/unicode_text.h"

namespace kvault {

// A piece of the text: [begin, begin + len); len == 0 once merged away.
// prev/next are indices into the symbol vector, -1 at either end.
struct MergeSymbol {
  int prev;
  int next;
  size_t begin;
  size_t len;
};

// Returns one symbol per UTF-8 character of `text` (a truncated trailing
// sequence is one short symbol), linked in order.
inline std::vector<MergeSymbol> SplitIntoSymbols(std::string_view text) {
  std::vector<MergeSymbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min(Utf8LeadLength(text[pos]), text.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, -1, pos, len});
    if (index > 0) symbols[index - 1].next = index;
    pos += len;
  }
  return symbols;
}

// Merges adjacent symbols of `text` while some pair has a priority:
// `priority(left_piece, right_piece)` returns std::optional<double>, nullopt
// when the pair may not merge. The highest priority merges first, ties go
// to the leftmost pair. Afterwards the surviving symbols (from index 0,
// following next) are the pieces.
template <typename PriorityFn>
void MergeBestPairs(std::string_view text, std::vector<MergeSymbol>& symbols,
                    PriorityFn&& priority) {
  struct Pair {
    int left;
    int right;
    double priority;
    size_t len;  // left.len + right.len when queued; stale if it changed
  };
  struct Worse {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.priority < b.priority ||
             (a.priority == b.priority && a.left > b.left);
    }
  };
  std::priority_queue<Pair, std::vector<Pair>, Worse> queue;
  auto piece = [&](const MergeSymbol& s) { return text.substr(s.begin, s.len); };
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::optional<double> p =
        priority(piece(symbols[left]), piece(symbols[right]));
    if (p) queue.push({left, right, *p, symbols[left].len + symbols[right].len});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Pair b = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[b.left];
    MergeSymbol& right = symbols[b.right];
    // Pieces only grow, so a changed length means the pair is stale.
    if (left.len == 0 || right.len == 0 || left.len + right.len != b.len) {
      continue;
    }
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
}

}  // namespace kvault

#endif  // KVAULT_MODEL_SYMBOL_MERGE_H_
