// dspark perplexity: negative log-likelihood of a text file under the model, in strided windows
// of --ctx tokens (stride ctx/2, so every token after the first window is scored with at least
// ctx/2 tokens of context and every token is scored exactly once). --save-logits keeps the logits
// of every scored position, to compare devices or builds (scripts/gpu-check.sh).
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iostream>

#include "cli/command.h"
#include "cli/model_args.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "util/error.h"

namespace dspark::cli {
namespace {

struct PerplexityArgs {
  std::string model_dir;
  std::string file;
  int64_t ctx = 512;
  bool json = false;
  std::string save_logits;
  RuntimeArgs runtime;
};

int run_perplexity(const PerplexityArgs& args) {
  LoadedModel loaded = load_model_dir(args.model_dir, args.runtime);
  Transformer& model = *loaded.model;
  const std::string text = io::read_text_file(args.file);
  if (text.empty()) fail("{} is empty", args.file);
  const int64_t ctx = std::min<int64_t>(args.ctx, model.config().max_position_embeddings);
  if (ctx < 2) fail("--ctx must be at least 2 (got {})", args.ctx);

  // Start with BOS (or the end-of-text separator) so that the first real token is scored too and
  // bits per byte covers every byte of the file.
  std::vector<TokenId> ids = loaded.tokenizer->encode(text, /*add_special=*/false);
  std::vector<int64_t> tokens;
  if (auto bos = loaded.tokenizer->bos_id()) tokens.push_back(*bos);
  else if (!loaded.eos_ids.empty()) tokens.push_back(loaded.eos_ids[0]);
  else fail("the tokenizer has neither BOS nor EOS to start the text with");
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  const int64_t N = int64_t(tokens.size());

  torch::NoGradGuard no_grad;
  auto start = std::chrono::steady_clock::now();
  double nll = 0.0;
  int64_t scored = 0;
  const int64_t stride = std::max<int64_t>(1, ctx / 2);
  std::vector<at::Tensor> kept_logits;  // --save-logits: [n, V] per window, on the host
  if (!args.save_logits.empty()) {
    // Kept in RAM until the end (one file, one tensor): refuse what would not fit comfortably.
    const double gib = double(N - 1) * double(model.config().vocab_size) * 4.0 / double(1ull << 30);
    if (gib > 4.0)
      fail("--save-logits would hold {:.1f} GiB of logits ({} tokens x {} float32); score a shorter file", gib, N - 1,
           model.config().vocab_size);
  }
  for (int64_t begin = 0; scored < N - 1; begin += stride) {
    const int64_t end = std::min(N, begin + ctx);
    // Targets are tokens (begin, end); only those not scored by an earlier window count.
    const int64_t first_target = std::max(begin + 1, scored + 1);
    const int64_t n = end - first_target;
    at::Tensor window = torch::tensor(std::vector<int64_t>(tokens.begin() + begin, tokens.begin() + end))
                            .unsqueeze(0);
    // Rows predicting the targets [n, V]; one reduction and one copy per window on any device.
    at::Tensor logits = model.forward_full(window)[0].narrow(0, first_target - 1 - begin, n);
    at::Tensor targets = torch::tensor(std::vector<int64_t>(tokens.begin() + first_target, tokens.begin() + end))
                             .to(logits.device());
    at::Tensor log_probs = torch::log_softmax(logits, -1).gather(1, targets.unsqueeze(1));  // [n, 1]
    nll -= log_probs.to(torch::kFloat64).sum().item<double>();
    scored += n;
    if (!args.save_logits.empty()) kept_logits.push_back(logits.to(torch::kCPU, torch::kFloat32).contiguous());
    if (end == N) break;
  }
  if (!args.save_logits.empty()) {
    const at::Tensor all = torch::cat(kept_logits, 0).contiguous();  // [scored, V] float32
    io::write_safetensors(args.save_logits, {{"logits", io::DType::F32, all.sizes().vec(), all.data_ptr(), size_t(all.nbytes())}},
                          {{"model", args.model_dir}, {"device", model.device().str()}, {"dtype", dtype_to_hf(model.dtype())}});
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double nll_per_token = nll / double(scored);
  const double bits_per_byte = nll / std::log(2.0) / double(text.size());
  if (args.json) {
    nlohmann::json out = {{"tokens", scored},
                          {"bytes", text.size()},
                          {"ctx", ctx},
                          {"nll_per_token", nll_per_token},
                          {"perplexity", std::exp(nll_per_token)},
                          {"bits_per_byte", bits_per_byte},
                          {"seconds", seconds}};
    std::cout << out.dump() << "\n";
  } else {
    std::cout << fmt::format("tokens {}  bytes {}  nll/token {:.4f}  perplexity {:.3f}  bits/byte {:.4f}  ({:.1f} s)\n",
                             scored, text.size(), nll_per_token, std::exp(nll_per_token), bits_per_byte, seconds);
  }
  return 0;
}

}  // namespace

Command add_perplexity(CLI::App& root) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* app = root.add_subcommand("perplexity", "score a text file: nll per token and bits per byte");
  app->add_option("-m,--model", args->model_dir, "model directory")->required();
  app->add_option("-f,--file", args->file, "text file to score")->required();
  app->add_option("--ctx", args->ctx, "window length in tokens (stride ctx/2)");
  app->add_flag("--json", args->json, "print one JSON object");
  app->add_option("--save-logits", args->save_logits,
                  "write the logits of every scored position to this safetensors file ([tokens, V] float32, tensor 'logits')");
  args->runtime.add_to(app);
  return {app, [args] { return run_perplexity(*args); }};
}

}  // namespace dspark::cli
