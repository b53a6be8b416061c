#include "train/regen.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "drafter/dspark_config.h"
#include "io/atomic_file.h"
#include "io/prompts_file.h"
#include "train/token_file.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace dspark {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Complete lines of samples.jsonl; a torn last line (crash mid-write) is cut off.
int64_t complete_samples(const std::string& path) {
  if (!fs::exists(path)) return 0;
  std::string text = io::read_text_file(path);
  const size_t end = text.rfind('\n');
  const size_t keep = end == std::string::npos ? 0 : end + 1;
  if (keep != text.size()) fs::resize_file(path, keep);
  return int64_t(std::count(text.begin(), text.begin() + keep, '\n'));
}

void append_lines(const std::string& path, const std::string& lines) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot open {} for appending", path);
  io::write_all(fd, lines.data(), lines.size(), path);
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

int64_t regenerate(Transformer& target, const Tokenizer& tokenizer, const RegenOptions& o) {
  validate(o.sampling);
  if (o.batch < 1 || o.max_new_tokens < 1) fail("--batch and --max-new must be >= 1");
  const std::vector<std::string> prompts = io::read_prompts_jsonl(o.prompts_path);
  fs::create_directories(o.out_dir);
  const std::string samples_path = (fs::path(o.out_dir) / "samples.jsonl").string();
  const std::string meta_path = (fs::path(o.out_dir) / "regen.json").string();
  json meta = {{"target", to_json(TargetIdentity::of(target))},
               {"prompts", o.prompts_path},
               {"prompts_fingerprint", fmt::format("{:016x}", fnv1a64(io::read_text_file(o.prompts_path)))},
               {"temperature", o.sampling.temperature}, {"top_k", o.sampling.top_k}, {"top_p", o.sampling.top_p},
               {"seed", o.sampling.seed}, {"max_new_tokens", o.max_new_tokens}};
  if (fs::exists(meta_path)) {
    json old = json::parse(io::read_text_file(meta_path), nullptr, false);
    if (old.is_discarded() || old != meta)
      fail("{} holds data regenerated with other settings, prompts or target; use another --out", o.out_dir);
  } else {
    io::write_text_atomic(meta_path, meta.dump(2) + "\n");
  }
  const int64_t done_before = complete_samples(samples_path);
  const int64_t total = int64_t(prompts.size());
  torch::NoGradGuard no_grad;
  InterruptFlag interrupted;
  Progress progress("regen", total, 10.0);
  progress.set_start(done_before);
  int64_t generated_tokens = 0;
  const auto start = std::chrono::steady_clock::now();

  for (int64_t group = done_before; group < total && !interrupted.raised(); group += o.batch) {
    const int64_t n = std::min(o.batch, total - group);
    struct Seq {
      KVCache cache;
      std::vector<int64_t> tokens;
      int64_t n_prompt;
      Rng rng;
      bool done = false;
    };
    std::vector<Seq> seqs;
    seqs.reserve(size_t(n));
    std::vector<SequenceChunk> chunks;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> ids;
      for (TokenId t : tokenizer.encode(prompts[size_t(group + i)], false)) ids.push_back(t);
      if (ids.empty()) fail("{}: prompt {} is empty after tokenization", o.prompts_path, group + i + 1);
      const int64_t limit = target.config().max_position_embeddings - 1;
      if (int64_t(ids.size()) > limit) ids.erase(ids.begin(), ids.end() - limit);
      // Each prompt has its own seeded generator: results do not depend on batching.
      seqs.push_back({target.new_cache(), ids, int64_t(ids.size()), Rng(o.sampling.seed * 1000003 + uint64_t(group + i)), false});
    }
    for (auto& s : seqs) chunks.push_back({&s.cache, s.tokens, LogitsAt::Last});
    std::vector<Seq*> owners;
    for (auto& s : seqs) owners.push_back(&s);
    while (!chunks.empty()) {
      std::vector<ChunkOutput> outs = target.forward(chunks);
      std::vector<SequenceChunk> next_chunks;
      std::vector<Seq*> next_owners;
      for (size_t c = 0; c < chunks.size(); ++c) {
        Seq& s = *owners[c];
        const int64_t token = sample_token(outs[c].logits[0], o.sampling, s.rng);
        s.tokens.push_back(token);
        ++generated_tokens;
        const bool eos = std::find(o.eos_ids.begin(), o.eos_ids.end(), token) != o.eos_ids.end();
        const bool full = int64_t(s.tokens.size()) - s.n_prompt >= o.max_new_tokens ||
                          s.cache.length() + 1 >= target.config().max_position_embeddings;
        if (eos || full) continue;
        next_chunks.push_back({&s.cache, {token}, LogitsAt::Last});
        next_owners.push_back(&s);
      }
      chunks = std::move(next_chunks);
      owners = std::move(next_owners);
    }
    std::string lines;
    for (int64_t i = 0; i < n; ++i)
      lines += json{{"id", group + i}, {"n_prompt", seqs[size_t(i)].n_prompt}, {"tokens", seqs[size_t(i)].tokens}}.dump() + "\n";
    append_lines(samples_path, lines);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (o.progress) progress.update(group + n, fmt::format("{:.0f} tok/s", generated_tokens / secs));
  }
  const int64_t count = complete_samples(samples_path);
  if (o.progress) progress.finish(fmt::format("{} samples in {}", count, o.out_dir));
  return count;
}

std::vector<RegenSample> read_regen_samples(const std::string& dir) {
  const std::string path = (fs::path(dir) / "samples.jsonl").string();
  if (!fs::exists(path)) fail("'{}' holds no regenerated data (no samples.jsonl); run dspark regen first", dir);
  std::istringstream in(io::read_text_file(path));
  std::vector<RegenSample> samples;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (in.eof() && !line.empty()) break;  // torn last line
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("tokens") || !j.contains("n_prompt"))
      fail("{}:{}: malformed sample", path, number);
    RegenSample s;
    try {
      s.id = j.value("id", int64_t(samples.size()));
      s.n_prompt = j["n_prompt"].get<int64_t>();
      s.tokens = j["tokens"].get<std::vector<int64_t>>();
    } catch (const json::exception&) {
      fail("{}:{}: malformed sample", path, number);
    }
    if (s.n_prompt < 1 || s.n_prompt > int64_t(s.tokens.size())) fail("{}:{}: bad n_prompt", path, number);
    samples.push_back(std::move(s));
  }
  if (samples.empty()) fail("{}: no samples", path);
  return samples;
}

}  // namespace dspark
