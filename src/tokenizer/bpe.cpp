#include "tokenizer/bpe.h"

#include <queue>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dspark {

namespace {

constexpr size_t kCacheCapacity = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

std::string byte_token(unsigned char b) { return fmt::format("<0x{:02X}>", b); }

}  // namespace

BpeModel::BpeModel(std::vector<std::pair<std::string, TokenId>> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : options_(std::move(options)) {
  TokenId max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0) fail("tokenizer: negative id {} for token '{}'", id, token);
    max_id = std::max(max_id, id);
  }
  id_to_token_.resize(size_t(max_id + 1));
  present_.assign(size_t(max_id + 1), false);
  for (auto& [token, id] : vocab) {
    if (present_[id])
      fail("tokenizer: id {} is given to both '{}' and '{}'", id, id_to_token_[id], token);
    id_to_token_[id] = std::move(token);
    present_[id] = true;
  }
  token_to_id_.reserve(vocab.size());
  for (size_t id = 0; id < id_to_token_.size(); ++id) {
    if (present_[id]) token_to_id_.emplace(id_to_token_[id], static_cast<TokenId>(id));
  }

  merges_.reserve(merges.size());
  const size_t prefix_len = options_.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = token_to_id_.find(a);
    const auto ib = token_to_id_.find(b);
    if (ia == token_to_id_.end() || ib == token_to_id_.end())
      fail("tokenizer: merge '{} {}' uses a token missing from the vocab", a, b);
    // With a subword prefix, "a" + "##b" merges to "ab" (the prefix of the right part goes).
    std::string merged = a;
    if (prefix_len && b.compare(0, prefix_len, options_.continuing_subword_prefix) == 0)
      merged.append(b, prefix_len);
    else
      merged += b;
    const auto im = token_to_id_.find(merged);
    if (im == token_to_id_.end())
      fail("tokenizer: merge '{} {}' result is missing from the vocab", a, b);
    // A pair listed twice keeps its first (highest-priority) rank.
    merges_.try_emplace(pair_key(ia->second, ib->second), Merge{uint32_t(rank), im->second});
  }

  if (options_.unk_token) {
    if (auto id = token_to_id(*options_.unk_token)) unk_id_ = id;
  }
  if (options_.byte_fallback) {
    byte_tokens_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      if (auto id = token_to_id(byte_token(static_cast<unsigned char>(b)))) byte_tokens_[b] = *id;
    }
  }
}

std::optional<TokenId> BpeModel::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeModel::id_to_token(TokenId id) const {
  static const std::string empty;
  return contains(id) ? id_to_token_[id] : empty;
}

void BpeModel::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  // Symbols form a doubly linked list over a vector; a merged-away symbol gets id -1.
  struct Symbol {
    TokenId id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto push = [&](TokenId id) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
  };

  // 1. One symbol per character (HF splits into chars, not bytes).
  bool previous_unk = false;
  std::string piece;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = utf8::next(word, pos).len;
    piece.clear();
    if (pos > 0) piece += options_.continuing_subword_prefix;
    piece.append(word.substr(pos, len));
    if (pos + len == word.size()) piece += options_.end_of_word_suffix;
    pos += len;

    if (auto id = token_to_id(piece)) {
      push(*id);
      previous_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      const std::string_view bytes = std::string_view(piece);
      bool all = true;
      for (unsigned char b : bytes) all = all && byte_tokens_[b] >= 0;
      if (all) {
        for (unsigned char b : bytes) push(byte_tokens_[b]);
        previous_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(options_.fuse_unk && previous_unk)) push(*unk_id_);
      previous_unk = true;
    }
    // No unk token configured: the character is dropped, as HF does.
  }

  // 2. Merge: always the lowest rank first, leftmost on ties; stale queue entries are skipped.
  struct Candidate {
    uint32_t rank;
    int pos;
    TokenId result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.result});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.result != top.result) continue;  // pair changed since
    left.id = top.result;
    right.id = -1;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace dspark
