// Training text from local files: directories are walked recursively, files are taken in sorted
// path order (so a corpus is the same list on every machine), optionally filtered by extension.
#pragma once
#include <string>
#include <vector>

namespace dspark {

struct CorpusOptions {
  std::vector<std::string> extensions;  // e.g. {".py"}; empty: every regular file
  std::vector<std::string> exclude;     // path components to skip, e.g. {"encodings"}
};

// Throws dspark::Error when a path does not exist or nothing is found.
std::vector<std::string> list_corpus_files(const std::vector<std::string>& paths, const CorpusOptions& options);

// The file's bytes as they are (byte-level BPE handles any byte). Throws on a read error.
std::string read_corpus_file(const std::string& path);

}  // namespace dspark
