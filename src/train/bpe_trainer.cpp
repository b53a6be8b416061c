#include "train/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "tokenizer/regex.h"
#include "util/error.h"

namespace dspark {
namespace {

using TokenPair = std::pair<int32_t, int32_t>;

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
TokenPair key_pair(uint64_t key) { return {int32_t(key >> 32), int32_t(key & 0xffffffffu)}; }

const Regex& split_regex() {
  static const Regex regex(byte_level_split_pattern());
  return regex;
}

struct Word {
  std::vector<int32_t> symbols;  // token ids
  int64_t count = 0;
};

// Heap entry; stale entries (count no longer current) are skipped or refreshed when popped.
struct Candidate {
  int64_t count;
  uint64_t key;
  // Most frequent first; ties go to the smaller pair of ids (older tokens), which makes the result
  // independent of hash-map iteration order.
  bool operator<(const Candidate& other) const {
    if (count != other.count) return count < other.count;
    return key > other.key;
  }
};

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {
  const int64_t minimum = 256 + int64_t(options_.special_tokens.size());
  if (options_.vocab_size < minimum)
    fail("vocabulary size {} is too small: the 256 bytes and {} special tokens need {}", options_.vocab_size,
         options_.special_tokens.size(), minimum);
}

void BpeTrainer::add_text(std::string_view text) {
  for (const auto& [begin, end] : split_regex().find_all(text))
    ++word_counts_[std::string(text.substr(begin, end - begin))];
  // Bytes the regex does not match (ill-formed UTF-8) still need their single-byte tokens, which
  // always exist, so nothing is lost by not counting them.
}

ByteLevelBpe BpeTrainer::train(const std::function<void(int64_t, int64_t)>& on_merge) const {
  ByteLevelBpe bpe;
  for (int b = 0; b < 256; ++b) bpe.tokens.push_back(std::string(1, char(b)));
  bpe.special_tokens = options_.special_tokens;
  const int64_t target_merges = options_.vocab_size - 256 - int64_t(options_.special_tokens.size());

  // Sorted words make the result independent of hash order.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts_.begin(), word_counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [text, count] : sorted) {
    Word w;
    w.count = count;
    for (unsigned char c : text) w.symbols.push_back(c);
    words.push_back(std::move(w));
  }

  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;  // may hold stale word ids
  for (int32_t wi = 0; wi < int32_t(words.size()); ++wi) {
    const Word& w = words[wi];
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      const uint64_t key = pair_key(w.symbols[i], w.symbols[i + 1]);
      pair_counts[key] += w.count;
      auto& list = pair_words[key];
      if (list.empty() || list.back() != wi) list.push_back(wi);
    }
  }
  std::priority_queue<Candidate> heap;
  for (const auto& [key, count] : pair_counts) heap.push({count, key});

  std::unordered_set<uint64_t> touched;
  while (int64_t(bpe.merges.size()) < target_merges && !heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    const auto it = pair_counts.find(top.key);
    const int64_t current = it == pair_counts.end() ? 0 : it->second;
    if (current != top.count) {
      if (current > 0) heap.push({current, top.key});
      continue;
    }
    if (current < options_.min_pair_count) break;

    const auto [a, b] = key_pair(top.key);
    const int32_t merged = int32_t(bpe.tokens.size());
    bpe.tokens.push_back(bpe.tokens[a] + bpe.tokens[b]);
    bpe.merges.emplace_back(bpe.tokens[a], bpe.tokens[b]);

    // Rewrite every word holding the pair: remove its old pair counts, merge left to right, add
    // the new pair counts. Words are short, so recounting a whole word is cheap and obviously right.
    std::vector<int32_t> holders = std::move(pair_words[top.key]);
    pair_words.erase(top.key);
    touched.clear();
    for (int32_t wi : holders) {
      Word& w = words[wi];
      bool found = false;
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
        if (w.symbols[i] == a && w.symbols[i + 1] == b) { found = true; break; }
      if (!found) continue;
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        const uint64_t key = pair_key(w.symbols[i], w.symbols[i + 1]);
        pair_counts[key] -= w.count;
        touched.insert(key);
      }
      std::vector<int32_t> next;
      next.reserve(w.symbols.size());
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == a && w.symbols[i + 1] == b) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(next);
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        const uint64_t key = pair_key(w.symbols[i], w.symbols[i + 1]);
        pair_counts[key] += w.count;
        touched.insert(key);
        auto& list = pair_words[key];
        if (list.empty() || list.back() != wi) list.push_back(wi);
      }
    }
    for (uint64_t key : touched) {
      const int64_t count = pair_counts[key];
      if (count <= 0) {
        pair_counts.erase(key);
        if (key != top.key) continue;
      } else {
        heap.push({count, key});
      }
    }
    pair_counts.erase(top.key);
    if (on_merge) on_merge(int64_t(bpe.merges.size()), target_merges);
  }
  return bpe;
}

}  // namespace dspark
