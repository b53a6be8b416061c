// Tokenizer::load: picks the tokenizer file, then settles BOS/EOS from it and from the model's
// config files, which is where models actually declare them (generation_config.json often lists
// several EOS ids, e.g. Llama-3's <|end_of_text|> and <|eot_id|>).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace dspark {

namespace {

namespace fs = std::filesystem;

// The parsed file, or null JSON when it does not exist. A file that exists but does not parse is
// an error: silently ignoring it would hide a wrong EOS.
nlohmann::json read_optional_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer: cannot open '{}'", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer: '{}' is not valid JSON: {}", path.string(), e.what());
  }
}

// A token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> token_name(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

// eos_token_id / bos_token_id: an int or a list of ints.
std::vector<TokenId> id_list(const nlohmann::json& value, const fs::path& file, const char* key) {
  std::vector<TokenId> ids;
  if (value.is_number_integer()) {
    ids.push_back(value.get<TokenId>());
  } else if (value.is_array()) {
    for (const auto& v : value) {
      if (!v.is_number_integer())
        fail("tokenizer: '{}': '{}' holds a non-integer", file.string(), key);
      ids.push_back(v.get<TokenId>());
    }
  } else if (!value.is_null()) {
    fail("tokenizer: '{}': '{}' is neither an integer nor a list", file.string(), key);
  }
  return ids;
}

void add_unique(std::vector<TokenId>& ids, TokenId id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

struct Files {
  fs::path tokenizer;  // tokenizer.json or tokenizer.model
  fs::path dir;        // where the config files may be
};

Files locate(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) {
    for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
      if (fs::is_regular_file(p / name, ec)) return {p / name, p};
    }
    fail("tokenizer: no tokenizer.json or tokenizer.model in '{}'", path);
  }
  if (!fs::exists(p, ec)) fail("tokenizer: '{}' does not exist", path);
  return {p, p.has_parent_path() ? p.parent_path() : fs::path(".")};
}

bool is_json_file(const fs::path& path) {
  if (path.extension() == ".json") return true;
  if (path.extension() == ".model") return false;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c) && std::isspace(static_cast<unsigned char>(c))) {
  }
  return c == '{';
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  const Files files = locate(path);
  const std::string file = files.tokenizer.string();

  std::unique_ptr<TokenizerBase> tokenizer;
  std::optional<TokenId> bos;
  std::vector<TokenId> eos;
  if (is_json_file(files.tokenizer)) {
    auto hf = HfTokenizer::from_file(file);
    bos = hf->template_bos();
    tokenizer = std::move(hf);
  } else {
    auto sp = SentencePieceTokenizer::from_file(file);
    bos = sp->model_bos();
    if (auto id = sp->model_eos()) eos.push_back(*id);
    tokenizer = std::move(sp);
  }

  const auto tokenizer_config = read_optional_json(files.dir / "tokenizer_config.json");
  const auto generation_config = read_optional_json(files.dir / "generation_config.json");
  const auto model_config = read_optional_json(files.dir / "config.json");

  // BOS: tokenizer_config.json's bos_token is what HF tokenizers report (null there means none,
  // as for Qwen, whose config.json still carries a bos_token_id it never uses); else the file's
  // own; else the model configs.
  const auto id_of = [&](const nlohmann::json& name_json,
                         const fs::path& where) -> std::optional<TokenId> {
    const auto name = token_name(name_json);
    if (!name) return std::nullopt;
    const auto id = tokenizer->token_to_id(*name);
    if (!id)
      fail("tokenizer: '{}' names token '{}', which is not in the vocabulary", where.string(),
           *name);
    return id;
  };
  const fs::path tokenizer_config_path = files.dir / "tokenizer_config.json";
  if (tokenizer_config.is_object() && tokenizer_config.contains("bos_token")) {
    bos = id_of(tokenizer_config["bos_token"], tokenizer_config_path);
  } else if (!bos) {
    for (const auto* config : {&generation_config, &model_config}) {
      if (config->is_object() && config->contains("bos_token_id")) {
        const auto ids = id_list((*config)["bos_token_id"], files.dir, "bos_token_id");
        if (!ids.empty()) {
          bos = ids.front();
          break;
        }
      }
    }
  }

  // EOS: every id any of the files declares, generation_config.json's first (it is what
  // generation stops on), then config.json's, then tokenizer_config.json's eos_token.
  std::vector<TokenId> all_eos;
  for (const auto& [config, name] : {std::pair{&generation_config, "generation_config.json"},
                                     std::pair{&model_config, "config.json"}}) {
    if (config->is_object() && config->contains("eos_token_id"))
      for (TokenId id : id_list((*config)["eos_token_id"], files.dir / name, "eos_token_id"))
        add_unique(all_eos, id);
  }
  if (tokenizer_config.is_object() && tokenizer_config.contains("eos_token")) {
    if (auto id = id_of(tokenizer_config["eos_token"], tokenizer_config_path))
      add_unique(all_eos, *id);
  }
  for (TokenId id : eos) add_unique(all_eos, id);

  if (auto* sp = dynamic_cast<SentencePieceTokenizer*>(tokenizer.get());
      sp && tokenizer_config.is_object()) {
    if (tokenizer_config.contains("add_bos_token") &&
        tokenizer_config["add_bos_token"].is_boolean())
      sp->set_add_bos(tokenizer_config["add_bos_token"].get<bool>());
    if (tokenizer_config.contains("add_eos_token") &&
        tokenizer_config["add_eos_token"].is_boolean())
      sp->set_add_eos(tokenizer_config["add_eos_token"].get<bool>());
  }

  tokenizer->set_bos_id(bos);
  tokenizer->set_eos_ids(std::move(all_eos));
  return tokenizer;
}

}  // namespace dspark
