#include "train/lm_trainer.h"

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "io/atomic_file.h"
#include "model/config.h"
#include "model/device.h"
#include "model/bf16_training_linear.h"
#include "model/model_dir.h"
#include "model/ops.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "train/distributed.h"
#include "train/lr_schedule.h"
#include "train/token_file.h"
#include "train/train_state.h"
#include "train/window_sampler.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace dspark {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Tokenizes every corpus file (one document each, followed by end-of-text) into `path`, unless a
// token file made with the same tokenizer and the same file list is already there.
TokenFile tokenize_corpus(const std::vector<std::string>& paths, const CorpusOptions& corpus_options,
                          const Tokenizer& tokenizer, int64_t end_of_text, uint64_t tokenizer_fingerprint,
                          const std::string& path, bool show) {
  const std::vector<std::string> files = list_corpus_files(paths, corpus_options);
  std::string listing;
  for (const auto& f : files) listing += f + "\n";
  const uint64_t fingerprint = tokenizer_fingerprint ^ (fnv1a64(listing) * 31);
  if (fs::exists(path)) {
    TokenFile existing = TokenFile::open(path);
    if (existing.info().tokenizer_fingerprint == fingerprint) return existing;
  }
  std::vector<int32_t> tokens;
  int64_t bytes = 0;
  const auto start = Clock::now();
  for (const auto& f : files) {
    const std::string text = read_corpus_file(f);
    bytes += int64_t(text.size());
    for (TokenId id : tokenizer.encode(text, false)) tokens.push_back(int32_t(id));
    tokens.push_back(int32_t(end_of_text));
  }
  write_token_file(path, tokens, uint64_t(tokenizer.vocab_size()), fingerprint);
  if (show)
    std::cerr << fmt::format("tokenized {} files, {:.2f} MB -> {} tokens ({:.2f} bytes/token) in {:.1f} s: {}\n",
                             files.size(), bytes / 1e6, tokens.size(), double(bytes) / double(tokens.size()),
                             seconds_since(start), path);
  return TokenFile::open(path);
}

// [B, T + 1] windows -> (inputs [B, T], targets [B, T]).
std::pair<at::Tensor, at::Tensor> batch_tensors(const TokenFile& data, const std::vector<int64_t>& starts,
                                                int64_t seq_len) {
  at::Tensor window = torch::empty({int64_t(starts.size()), seq_len + 1}, torch::kInt64);
  int64_t* p = window.data_ptr<int64_t>();
  for (size_t b = 0; b < starts.size(); ++b) data.read(starts[b], seq_len + 1, p + b * (seq_len + 1));
  return {window.narrow(1, 0, seq_len), window.narrow(1, 1, seq_len).contiguous()};
}

// Summed next-token cross-entropy of `targets` [B, T] given `inputs` [B, T]. The LM head runs over
// row chunks so that no [B*T, V] float32 block is allocated at once: blocks above glibc's mmap
// threshold (32 MB) are mapped and zero-faulted on every step, measured ~20% of a training step.
at::Tensor summed_lm_loss(Transformer& model, const at::Tensor& inputs, const at::Tensor& targets) {
  constexpr int64_t kRowsPerChunk = 512;
  at::Tensor hidden = model.hidden_full(inputs);  // [B, T, H]
  hidden = hidden.reshape({-1, hidden.size(-1)});  // [N, H]
  at::Tensor flat_targets = targets.reshape({-1}).to(hidden.device());  // [N]
  at::Tensor total;
  for (int64_t row = 0; row < hidden.size(0); row += kRowsPerChunk) {
    const int64_t n = std::min<int64_t>(kRowsPerChunk, hidden.size(0) - row);
    at::Tensor logits = model.logits_from_final_hidden(hidden.narrow(0, row, n));  // [n, V] float32
    at::Tensor part = torch::nn::functional::cross_entropy(
        logits, flat_targets.narrow(0, row, n), torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    total = total.defined() ? total + part : part;
  }
  return total;
}

double evaluate(Transformer& model, const TokenFile& valid, int64_t seq_len, int64_t windows, int64_t batch) {
  torch::NoGradGuard no_grad;
  const int64_t available = (valid.size() - 1) / seq_len;
  const int64_t n = std::min(windows, available);
  if (n <= 0) return -1;
  // Evenly spaced windows cover the whole held-out set, not just its first file.
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < n; ++i) starts.push_back((i * available / n) * seq_len);
  double total = 0;
  int64_t count = 0;
  for (size_t i = 0; i < starts.size(); i += size_t(batch)) {
    std::vector<int64_t> chunk(starts.begin() + i, starts.begin() + std::min(starts.size(), i + size_t(batch)));
    auto [inputs, targets] = batch_tensors(valid, chunk, seq_len);
    total += summed_lm_loss(model, inputs, targets).item<double>();
    count += targets.numel();
  }
  return total / double(count);
}

json options_identity(const LmTrainOptions& o, const std::string& config_text, uint64_t data_fp) {
  // What must not change across a resume for it to be the same run.
  json id = {{"config", fnv1a64(config_text)}, {"seq_len", o.seq_len}, {"batch_size", o.batch_size},
          {"lr", o.lr}, {"min_lr_ratio", o.min_lr_ratio}, {"weight_decay", o.weight_decay},
          {"beta1", o.beta1}, {"beta2", o.beta2}, {"grad_clip", o.grad_clip}, {"seed", o.seed},
          {"dtype", o.dtype}, {"data", data_fp}};
  if (!o.init_dir.empty()) id["init"] = o.init_dir;
  if (o.matmul != "f32") id["matmul"] = o.matmul;  // absent for f32: older checkpoints still resume
  return id;
}

}  // namespace

LmTrainResult train_lm(const LmTrainOptions& o) {
  if (o.seq_len < 2 || o.batch_size < 1) fail("--seq-len must be >= 2 and --batch-size >= 1");
  if (o.steps <= 0 && o.minutes <= 0 && !o.resume) fail("give --steps N or --minutes M");
  if (!(o.lr > 0)) fail("--lr must be positive");
  if (o.matmul != "f32" && o.matmul != "bf16") fail("--matmul must be f32 or bf16, not {}", o.matmul);
  if (o.matmul == "bf16" && !bf16_training_linear_available())
    fail("--matmul bf16 needs a CPU with AMX-BF16 (and Linux >= 5.16); use --matmul f32");
  if (o.matmul == "bf16" && o.dtype != "f32") fail("--matmul bf16 works on f32 parameters (--train-dtype f32)");
  const c10::Device device = parse_device(o.device);
  if (o.matmul == "bf16" && !device.is_cpu()) fail("--matmul bf16 is a CPU path (AMX); on a GPU use --train-dtype bf16");
  const Bf16MatmulScope bf16_matmuls(o.matmul == "bf16");
  const auto run_start = Clock::now();
  DataParallel dp(o.dist);
  const auto [row_begin, row_end] = dp.shard(o.batch_size);
  const bool show = o.progress && dp.main();
  const fs::path out(o.out_dir), train_dir = out / "train";
  fs::create_directories(train_dir);
  const std::string state_path = (train_dir / "train_state.safetensors").string();
  const bool have_state = fs::exists(state_path);
  if (have_state && !o.resume)
    fail("{} already holds a training run; pass --resume to continue it or choose another --out", o.out_dir);

  // Model config and tokenizer.
  const std::string config_text = io::read_text_file(o.config_path);
  ModelConfig config = parse_model_config(config_text, o.config_path);
  if (config.arch != Architecture::Qwen3 && config.arch != Architecture::Llama && config.arch != Architecture::Qwen2)
    fail("{}: train-lm trains Qwen3 / Qwen2 / Llama architectures", o.config_path);
  const std::string tokenizer_path = (fs::path(o.tokenizer_dir) / "tokenizer.json").string();
  const std::string tokenizer_text = io::read_text_file(tokenizer_path);
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(o.tokenizer_dir);
  if (tokenizer->vocab_size() > config.vocab_size)
    fail("tokenizer has {} tokens but {} has vocab_size {}", tokenizer->vocab_size(), o.config_path, config.vocab_size);
  const auto eot = tokenizer->token_to_id("<|endoftext|>");
  if (!eot) fail("{} has no <|endoftext|> token", tokenizer_path);
  const uint64_t tokenizer_fp = fnv1a64(tokenizer_text);

  // Corpus -> token files.
  const TokenFile train_data = tokenize_corpus(o.corpus, o.corpus_options, *tokenizer, *eot, tokenizer_fp,
                                               (train_dir / "train.tokens").string(), show);
  std::optional<TokenFile> valid_data;
  if (!o.valid_corpus.empty())
    valid_data = tokenize_corpus(o.valid_corpus, o.corpus_options, *tokenizer, *eot, tokenizer_fp,
                                 (train_dir / "valid.tokens").string(), show);
  if (train_data.size() < o.seq_len + 1)
    fail("training corpus has {} tokens, fewer than one window of {}", train_data.size(), o.seq_len + 1);
  const uint64_t data_fp = train_data.info().tokenizer_fingerprint ^ uint64_t(train_data.size());

  // Model and optimizer. Parameters are created from the seed even when resuming (then
  // overwritten), so both paths build identical objects.
  const c10::ScalarType dtype = parse_dtype(o.dtype);
  ModelWeights initial = o.init_dir.empty() ? random_weights(config, dtype, o.seed) : load_weights(config, o.init_dir, dtype);
  if (!device.is_cpu())
    for (auto& [name, t] : initial.named()) *t = t->to(device);
  if (config.tie_word_embeddings) initial.lm_head = initial.embed;  // one shared parameter
  Transformer model(config, std::move(initial), device);
  NamedParameters params;
  std::vector<at::Tensor> decay, no_decay, all_params;
  for (auto& [name, tensor] : model.weights().named()) {
    tensor->requires_grad_(true);
    params.emplace_back(name, *tensor);
    all_params.push_back(*tensor);
    (tensor->dim() >= 2 ? decay : no_decay).push_back(*tensor);
  }
  auto adam = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, adam(o.weight_decay));
  groups.emplace_back(no_decay, adam(0.0));
  torch::optim::AdamW optimizer(groups, torch::optim::AdamWOptions(o.lr));

  const json identity = options_identity(o, config_text, data_fp);
  int64_t step = 0, total_steps = o.steps;
  if (have_state) {
    json state = load_train_state(state_path, params, optimizer);
    if (state.value("identity", json()) != identity)
      fail("{} was made with other options or data (config, batch, seq-len, lr, seed or corpus differ); "
           "resume with the original options", state_path);
    step = state.at("step").get<int64_t>();
    const int64_t saved_total = state.at("total_steps").get<int64_t>();
    if (o.steps > 0 && o.steps != saved_total)
      fail("--steps {} differs from the resumed run's {}", o.steps, saved_total);
    total_steps = saved_total;
  } else if (o.resume && show) {
    std::cerr << "no checkpoint in " << o.out_dir << ", starting a new run\n";
  }
  if (total_steps <= 0 && o.minutes <= 0) fail("give --steps N or --minutes M");

  WindowSampler sampler(train_data.size(), o.seq_len, o.seed);
  const int64_t eval_every_default = std::max<int64_t>(1, (total_steps > 0 ? total_steps : 1000) / 10);
  std::ofstream log;
  if (dp.main()) log.open((train_dir / "log.jsonl").string(), std::ios::app);

  auto export_model = [&] {
    json config_json = json::parse(config_text);
    config_json["eos_token_id"] = *eot;
    config_json.erase("bos_token_id");
    io::write_text_atomic((out / "tokenizer.json").string(), tokenizer_text);
    write_model_dir(out.string(), config_json, model.weights(), parse_dtype(o.save_dtype));
  };
  auto checkpoint = [&] {
    if (!dp.main()) return;
    save_train_state(state_path, params, optimizer,
                     {{"step", step}, {"total_steps", total_steps}, {"identity", identity}});
    export_model();
  };

  InterruptFlag interrupted;  // Ctrl-C / SIGTERM: finish the step, checkpoint, exit
  LmTrainResult result;
  Progress progress("train-lm", std::max<int64_t>(total_steps, 1));
  progress.set_start(step);
  auto last_checkpoint = Clock::now();
  double loss_sum = 0;
  int64_t loss_count = 0, tokens_this_run = 0;
  const auto loop_start = Clock::now();
  const int64_t start_step = step;
  // Whether to stop before step `s`. With several ranks every rank must stop at the same step: the
  // decision for the next step travels with each step's gradients.
  auto want_stop = [&](int64_t s) {
    return (o.minutes > 0 && seconds_since(run_start) > o.minutes * 60) || interrupted.raised() ||
           (o.stop_at > 0 && s >= o.stop_at);
  };
  bool stop_agreed = o.stop_at > 0 && step >= o.stop_at;
  while (total_steps <= 0 || step < total_steps) {
    // Budget in minutes: the first steps measure the speed and fix the schedule length.
    if (dp.distributed() ? stop_agreed : want_stop(step)) break;
    dp.fault_point(step);
    const int64_t warmup = o.warmup_steps >= 0 ? o.warmup_steps : std::min<int64_t>(200, std::max<int64_t>(total_steps, 100) / 20);
    const double lr = warmup_cosine_lr(step, std::max<int64_t>(total_steps, 1), warmup, o.lr, o.min_lr_ratio);
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);

    const std::vector<int64_t> starts = sampler.batch(step, o.batch_size);
    auto [inputs, targets] = batch_tensors(
        train_data, std::vector<int64_t>(starts.begin() + row_begin, starts.begin() + row_end), o.seq_len);
    optimizer.zero_grad();
    at::Tensor loss = summed_lm_loss(model, inputs, targets) / double(targets.numel());
    double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) fail("loss became {} at step {}; lower --lr", loss_value, step);
    loss.backward();
    int64_t step_tokens = inputs.numel();
    if (dp.distributed()) {
      // Every rank's loss is a mean over the same number of tokens: the mean of the ranks'
      // gradients is the gradient of the whole batch's mean loss.
      const std::vector<double> sum =
          dp.sum_gradients(all_params, {loss_value, double(step_tokens), want_stop(step + 1) ? 1.0 : 0.0});
      for (auto& p : all_params)
        if (p.grad().defined()) p.grad().div_(double(dp.world_size()));
      loss_value = sum[0] / dp.world_size();
      step_tokens = int64_t(std::llround(sum[1]));
      stop_agreed = sum[2] > 0;
    }
    torch::nn::utils::clip_grad_norm_(all_params, o.grad_clip);
    optimizer.step();
    ++step;
    loss_sum += loss_value;
    ++loss_count;
    tokens_this_run += step_tokens;

    if (total_steps <= 0 && step - start_step == 5) {
      // Schedule length from the budget: the speed of steps 2..5 of this run.
      const double per_step = seconds_since(loop_start) / 5.0;
      total_steps = std::max<int64_t>(step + 1, int64_t((o.minutes * 60 - seconds_since(run_start)) / per_step) + step);
      total_steps = dp.broadcast_value(total_steps);  // rank 0's measurement sets every rank's schedule
      progress = Progress("train-lm", total_steps);
      progress.set_start(start_step);
    }
    const double tok_s = double(tokens_this_run) / seconds_since(loop_start);
    const std::string metrics = fmt::format("loss {:.3f} | lr {:.2e} | {:.0f} tok/s", loss_sum / loss_count, lr, tok_s);
    if (show) progress.update(step, metrics);
    if (step % 10 == 0 || step == total_steps) {
      if (dp.main())
        log << json{{"step", step}, {"loss", loss_sum / loss_count}, {"lr", lr}, {"tokens_per_second", tok_s}}.dump() << "\n";
      if (dp.main()) log.flush();
      result.train_loss = loss_sum / loss_count;
      loss_sum = 0;
      loss_count = 0;
    }
    const int64_t eval_every = o.eval_every > 0 ? o.eval_every : eval_every_default;
    if (valid_data && (step % eval_every == 0 || step == total_steps)) {
      // Every rank evaluates (the same number), so none waits at the next collective meanwhile.
      result.valid_loss = evaluate(model, *valid_data, o.seq_len, o.eval_windows, o.batch_size);
      if (dp.main()) {
        log << json{{"step", step}, {"valid_loss", result.valid_loss}}.dump() << "\n";
        log.flush();
      }
      if (show) {
        progress.update(step, metrics, true);
        std::cerr << fmt::format("\nstep {}: validation loss {:.4f} nats/token\n", step, result.valid_loss);
      }
    }
    if (seconds_since(last_checkpoint) > o.checkpoint_minutes * 60) {
      checkpoint();
      last_checkpoint = Clock::now();
    }
  }
  if (loss_count > 0) result.train_loss = loss_sum / loss_count;
  checkpoint();
  if (show) {
    progress.finish(fmt::format("loss {:.3f}", result.train_loss));
    std::cerr << fmt::format("{} at step {}/{}; model in {}\n",
                             step >= total_steps ? "finished" : "stopped (resume with --resume)", step, total_steps,
                             o.out_dir);
  }
  result.step = step;
  result.total_steps = total_steps;
  result.finished = total_steps > 0 && step >= total_steps;
  result.seconds = seconds_since(run_start);
  return result;
}

}  // namespace dspark
