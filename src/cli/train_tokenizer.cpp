// dspark train-tokenizer: byte-level BPE trained on local files, written as an HF tokenizer.json.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "tokenizer/tokenizer.h"
#include "train/bpe_trainer.h"
#include "train/corpus.h"
#include "util/error.h"
#include "util/progress.h"

namespace dspark::cli {
namespace {

struct TrainTokenizerArgs {
  std::vector<std::string> corpus;
  CorpusOptions corpus_options;
  BpeTrainerOptions bpe;
  std::string out_dir;
};

int run_train_tokenizer(const TrainTokenizerArgs& args) {
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> files = list_corpus_files(args.corpus, args.corpus_options);
  BpeTrainer trainer(args.bpe);
  int64_t bytes = 0;
  for (const auto& f : files) {
    const std::string text = read_corpus_file(f);
    bytes += int64_t(text.size());
    trainer.add_text(text);
  }
  std::cerr << fmt::format("{} files, {:.2f} MB, {} distinct words\n", files.size(), bytes / 1e6,
                           trainer.distinct_words());
  Progress progress("merges", args.bpe.vocab_size - 256 - int64_t(args.bpe.special_tokens.size()), 5.0);
  ByteLevelBpe bpe = trainer.train([&](int64_t done, int64_t) { progress.update(done, ""); });
  progress.finish("");
  fs::create_directories(args.out_dir);
  const std::string path = (fs::path(args.out_dir) / "tokenizer.json").string();
  write_tokenizer_json(path, bpe);
  // Read it back through the engine's own loader: what we wrote must be what we load.
  auto tokenizer = Tokenizer::load(args.out_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format("wrote {} ({} tokens: 256 bytes, {} merges, {} special) in {}\n", path,
                           tokenizer->vocab_size(), bpe.merges.size(), bpe.special_tokens.size(),
                           format_duration(seconds));
  if (int64_t(bpe.tokens.size() + bpe.special_tokens.size()) < args.bpe.vocab_size)
    std::cerr << fmt::format("note: the corpus ran out of pairs seen {}+ times; the vocabulary is smaller than {}\n",
                             args.bpe.min_pair_count, args.bpe.vocab_size);
  return 0;
}

}  // namespace

Command add_train_tokenizer(CLI::App& root) {
  auto args = std::make_shared<TrainTokenizerArgs>();
  CLI::App* app = root.add_subcommand("train-tokenizer", "train a byte-level BPE tokenizer (HF tokenizer.json)");
  app->add_option("--corpus", args->corpus, "corpus files or directories (walked recursively)")->required();
  app->add_option("--ext", args->corpus_options.extensions, "only files with these extensions in directories, e.g. .py");
  app->add_option("--exclude", args->corpus_options.exclude, "skip directories or files with these names");
  app->add_option("--vocab", args->bpe.vocab_size, "vocabulary size incl. 256 bytes and special tokens")->capture_default_str();
  app->add_option("--special", args->bpe.special_tokens, "special tokens (default: <|endoftext|>)");
  app->add_option("--min-count", args->bpe.min_pair_count, "stop when no pair occurs this often")->capture_default_str();
  app->add_option("--out", args->out_dir, "output directory")->required();
  return {app, [args] { return run_train_tokenizer(*args); }};
}

}  // namespace dspark::cli
