#include "spec/scheduler.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "drafter/dspark_config.h"
#include "io/atomic_file.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"
#include "model/device.h"
#include "model/ops.h"
#include "model/packed_weights.h"
#include "model/transformer.h"
#include "util/error.h"

namespace dspark {
using json = nlohmann::json;

namespace {
// Step time of t tokens per sequence from a table of SPS at t = 1..n, as a function of total
// tokens B = requests * t: linear between measured points, constant cost per token beyond.
double step_seconds(const std::vector<double>& sps_per_t, int64_t requests, double tokens) {
  const int64_t n = int64_t(sps_per_t.size());
  const double t = std::max(1.0, tokens / double(requests));
  if (t >= double(n)) return t / double(n) / sps_per_t.back();
  const int64_t lo = int64_t(t);  // 1 <= lo < n
  const double frac = t - double(lo);
  return (1.0 - frac) / sps_per_t[size_t(lo - 1)] + frac / sps_per_t[size_t(lo)];
}
}  // namespace

double SpsProfile::sps(int64_t tokens, int64_t requests) const {
  if (steps_per_second.empty()) fail("empty SPS profile");
  if (tokens < 1) tokens = 1;
  requests = std::clamp<int64_t>(requests, 1, max_batch());
  if (requests == 1) {
    const int64_t n = int64_t(steps_per_second.size());
    if (tokens <= n) return steps_per_second[size_t(tokens - 1)];
    // Past the measured range: the last measured cost per token, scaled.
    return steps_per_second.back() * double(n) / double(tokens);
  }
  return 1.0 / step_seconds(batch[size_t(requests - 2)], requests, double(tokens));
}

std::string model_fingerprint(Transformer& model) {
  const TargetIdentity id = TargetIdentity::of(model);
  return fmt::format("{}:{}x{}x{}:{}", id.architecture, id.num_layers, id.hidden_size, id.vocab_size, id.fingerprint);
}

SpsProfile measure_sps(Transformer& model, int64_t max_tokens, int64_t context, int64_t repeats, int64_t max_batch) {
  if (max_tokens < 1 || repeats < 1 || context < 1 || max_batch < 1)
    fail("--max-tokens, --repeats, --context and --batch must be >= 1");
  torch::NoGradGuard no_grad;
  const int64_t V = model.config().vocab_size;
  std::vector<int64_t> prefix(static_cast<size_t>(context));
  for (int64_t i = 0; i < context; ++i) prefix[size_t(i)] = (i * 7919 + 13) % V;
  // One cache per sequence of the largest batch, each holding the same prefix.
  std::vector<KVCache> caches;
  for (int64_t r = 0; r < max_batch; ++r) {
    caches.push_back(model.new_cache());
    model.forward(caches.back(), prefix, LogitsAt::None);
  }
  // seconds[R-1][T-1]: forwards of R sequences with T tokens each.
  std::vector<std::vector<std::vector<double>>> seconds(
      size_t(max_batch), std::vector<std::vector<double>>(static_cast<size_t>(max_tokens)));
  for (int64_t rep = -1; rep < repeats; ++rep) {  // rep = -1 warms up; sizes interleaved against noise
    for (int64_t R = 1; R <= max_batch; ++R) {
      for (int64_t T = 1; T <= max_tokens; ++T) {
        std::vector<SequenceChunk> chunks;
        for (int64_t r = 0; r < R; ++r) {
          std::vector<int64_t> chunk(static_cast<size_t>(T));
          for (int64_t i = 0; i < T; ++i) chunk[size_t(i)] = (rep * 31 + r * 7 + i * 17 + 5 + V) % V;
          chunks.push_back({&caches[size_t(r)], std::move(chunk), LogitsAt::All});
        }
        const auto start = std::chrono::steady_clock::now();
        model.forward(chunks);
        synchronize(model.device());
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (int64_t r = 0; r < R; ++r) caches[size_t(r)].truncate(context);
        if (rep >= 0) seconds[size_t(R - 1)][size_t(T - 1)].push_back(s);
      }
    }
  }
  auto medians = [](std::vector<std::vector<double>>& per_t) {
    std::vector<double> sps;
    for (auto& v : per_t) {
      std::sort(v.begin(), v.end());
      sps.push_back(1.0 / v[v.size() / 2]);
    }
    return sps;
  };
  SpsProfile p;
  p.steps_per_second = medians(seconds[0]);
  for (int64_t R = 2; R <= max_batch; ++R) p.batch.push_back(medians(seconds[size_t(R - 1)]));
  p.model_fingerprint = model_fingerprint(model);
  p.device = model.device().str();
  p.dtype = dtype_to_hf(model.dtype());
  p.threads = at::get_num_threads();
  p.kernels = measured_kernels(model.device().is_cpu());
  return p;
}

std::string measured_kernels(bool on_cpu) {
  if (!on_cpu) return "";
  if (!cpu_fast_paths_enabled()) return "libtorch";  // DSPARK_DISABLE_KERNELS
  const char* packed = packed_weights_enabled() ? kernels::isa_name(kernels::packed_bf16_isa()) : "off";
  return fmt::format("{} packed:{}", kernels::isa_name(kernels::best_isa()), packed);
}

bool sps_profile_current(const SpsProfile& profile, bool on_cpu) {
  // A GPU forward does not depend on the CPU threads.
  return (!on_cpu || profile.threads == at::get_num_threads()) && profile.kernels == measured_kernels(on_cpu);
}

namespace {
// Isotonic (non-decreasing) least-squares fit of the step times 1 / sps, back to steps/s.
std::vector<double> monotone_row(const std::vector<double>& sps) {
  struct Block {
    double sum;
    int64_t count;
  };
  std::vector<Block> blocks;
  for (double v : sps) {
    blocks.push_back({1.0 / v, 1});
    while (blocks.size() > 1) {
      const Block& last = blocks.back();
      Block& prev = blocks[blocks.size() - 2];
      if (prev.sum / double(prev.count) <= last.sum / double(last.count)) break;
      prev.sum += last.sum;
      prev.count += last.count;
      blocks.pop_back();
    }
  }
  std::vector<double> out;
  for (const Block& b : blocks) out.insert(out.end(), size_t(b.count), double(b.count) / b.sum);
  return out;
}
}  // namespace

SpsProfile monotone_sps_profile(SpsProfile p) {
  p.steps_per_second = monotone_row(p.steps_per_second);
  for (auto& row : p.batch) row = monotone_row(row);
  return p;
}

void save_sps_profile(const std::string& path, const SpsProfile& p) {
  json j = {{"kind", "dspark-sps-profile"}, {"model", p.model_fingerprint}, {"device", p.device},
            {"dtype", p.dtype}, {"threads", p.threads}, {"kernels", p.kernels},
            {"steps_per_second", p.steps_per_second}};
  if (!p.batch.empty()) j["batch_steps_per_second"] = p.batch;
  io::write_text_atomic(path, j.dump(2) + "\n");
}

SpsProfile load_sps_profile(const std::string& path, const std::string& fingerprint) {
  json j = json::parse(io::read_text_file(path), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("kind", "") != "dspark-sps-profile")
    fail("{} is not an SPS profile (run dspark profile)", path);
  SpsProfile p;
  try {
    p.model_fingerprint = j.at("model").get<std::string>();
    p.device = j.value("device", "");
    p.dtype = j.value("dtype", "");
    p.threads = j.value("threads", int64_t(0));
    p.kernels = j.value("kernels", "");
    p.steps_per_second = j.at("steps_per_second").get<std::vector<double>>();
    if (j.contains("batch_steps_per_second"))
      p.batch = j.at("batch_steps_per_second").get<std::vector<std::vector<double>>>();
  } catch (const json::exception&) {
    fail("{}: malformed SPS profile", path);
  }
  if (p.steps_per_second.empty()) fail("{}: empty SPS profile", path);
  for (double v : p.steps_per_second)
    if (!(v > 0) || !std::isfinite(v)) fail("{}: SPS values must be positive", path);
  for (const auto& row : p.batch) {
    if (row.empty()) fail("{}: empty batch row in the SPS profile", path);
    for (double v : row)
      if (!(v > 0) || !std::isfinite(v)) fail("{}: SPS values must be positive", path);
  }
  if (p.model_fingerprint != fingerprint) fail("{} was measured for another model; run dspark profile again", path);
  return p;
}

std::vector<int64_t> schedule_verify_lengths(const std::vector<std::vector<double>>& survival, const SpsProfile& sps,
                                             bool early_stop, double cycle_seconds, double forward_scale) {
  struct Candidate {
    double a;
    size_t r, j;
  };
  std::vector<Candidate> candidates;
  for (size_t r = 0; r < survival.size(); ++r)
    for (size_t j = 0; j < survival[r].size(); ++j) candidates.push_back({survival[r][j], r, j});
  // Descending survival; within a request survival is non-increasing, so ties keep position order
  // and every admitted set is a prefix per request.
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) { return x.a > y.a; });
  std::vector<int64_t> lengths(survival.size(), 0);
  const int64_t requests = int64_t(survival.size());
  int64_t tokens = requests;  // every request verifies its anchor
  double tau = double(requests);
  // Expected tokens per second of the whole cycle when `n` tokens are verified.
  auto throughput = [&](double expected, int64_t n) {
    return expected / (cycle_seconds + forward_scale / sps.sps(n, requests));
  };
  double best = throughput(tau, tokens);
  size_t best_count = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (int64_t(c.j) != lengths[c.r] && early_stop) break;  // not the next position of its request
    const double next_tau = tau + c.a;
    const double theta = throughput(next_tau, tokens + 1);
    if (early_stop) {
      if (theta <= best) break;  // the first candidate that does not help ends the search
      best = theta;
      ++lengths[c.r];
    } else if (theta > best) {
      best = theta;
      best_count = i + 1;
    }
    tau = next_tau;
    ++tokens;
  }
  if (!early_stop) {
    std::fill(lengths.begin(), lengths.end(), 0);
    for (size_t i = 0; i < best_count; ++i) ++lengths[candidates[i].r];
  }
  return lengths;
}

}  // namespace dspark
