#include "train/corpus.h"

#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"
#include "util/error.h"

namespace dspark {
namespace fs = std::filesystem;

namespace {
bool excluded(const fs::path& path, const CorpusOptions& options) {
  for (const auto& part : path)
    for (const auto& name : options.exclude)
      if (part == name) return true;
  return false;
}

bool wanted_extension(const fs::path& path, const CorpusOptions& options) {
  if (options.extensions.empty()) return true;
  const std::string ext = path.extension().string();
  return std::find(options.extensions.begin(), options.extensions.end(), ext) != options.extensions.end();
}
}  // namespace

std::vector<std::string> list_corpus_files(const std::vector<std::string>& paths, const CorpusOptions& options) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto status = fs::status(p, ec);
    if (ec || !fs::exists(status)) fail("corpus path '{}' does not exist", p);
    if (fs::is_directory(status)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const fs::path rel = fs::relative(it->path(), p);
        if (excluded(rel, options)) {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && wanted_extension(it->path(), options)) found.push_back(it->path().string());
      }
      if (ec) fail("cannot list corpus directory '{}': {}", p, ec.message());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(p);  // an explicitly named file is taken whatever its extension
    }
  }
  if (files.empty()) fail("no corpus files found in {}", paths.size() == 1 ? paths[0] : "the given paths");
  return files;
}

std::string read_corpus_file(const std::string& path) { return io::read_text_file(path); }

}  // namespace dspark
