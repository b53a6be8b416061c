// Reads a tokenizer.json quickly. The file is mostly model.vocab (up to ~260k entries) and
// model.merges (up to ~500k pairs); building nlohmann's DOM for those (an ordered map and
// half a million small arrays) takes seconds, so they are streamed straight into vectors with
// nlohmann's SAX interface and only the small rest of the document becomes a DOM.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace dspark {

struct TokenizerJson {
  nlohmann::json doc;  // the whole document except model.vocab and model.merges
  std::vector<std::pair<std::string, TokenId>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // both "a b" and ["a", "b"] forms
};

// Throws dspark::Error naming `path` when it cannot be read or parsed.
TokenizerJson read_tokenizer_json(const std::string& path);
// The same split for a document already in memory (e.g. one a BPE trainer just built).
TokenizerJson split_tokenizer_json(nlohmann::json doc);

}  // namespace dspark
