#include "cli/model_args.h"

#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark::cli {

LoadedModel load_model_dir(const std::string& dir, const RuntimeArgs& runtime) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("model directory '{}' does not exist", dir);
  runtime.apply();
  LoadedModel loaded;
  loaded.model = Transformer::load(dir, LoadOptions{runtime.dtype, runtime.device});
  loaded.tokenizer = Tokenizer::load(dir);
  loaded.eos_ids = loaded.model->config().eos_token_ids;
  for (TokenId id : loaded.tokenizer->eos_ids())
    if (std::find(loaded.eos_ids.begin(), loaded.eos_ids.end(), id) == loaded.eos_ids.end())
      loaded.eos_ids.push_back(id);
  return loaded;
}

std::string read_prompt(const std::string& text, const std::string& file) {
  if (!text.empty() && !file.empty()) fail("give either -p TEXT or -f FILE, not both");
  if (!file.empty()) return io::read_text_file(file);
  return text;
}

std::string one_line(const std::string& message) {
  std::string out = message.substr(0, message.find("\nException raised from"));
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

}  // namespace dspark::cli
