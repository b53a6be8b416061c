#include "tokenizer/tokenizer_json_reader.h"

#include <fstream>
#include <optional>

#include "util/error.h"

namespace dspark {

namespace {

using json = nlohmann::json;

// "a b" -> ("a", "b"). The string form cannot hold tokens with spaces, hence exactly one space.
std::optional<std::pair<std::string, std::string>> split_merge(const std::string& line) {
  const size_t space = line.find(' ');
  if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
    return std::nullopt;
  return std::pair{line.substr(0, space), line.substr(space + 1)};
}

// SAX handler: builds a DOM for everything except model.vocab / model.merges, which it streams
// into `out`.
class Reader : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t& v) override { return value(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::Merges && depth_ == mode_depth_) {  // "a b"
      auto merge = split_merge(v);
      if (!merge) return bad("model: merge '" + v + "' is not two tokens separated by one space");
      out_.merges.push_back(std::move(*merge));
      return true;
    }
    if (mode_ == Mode::Merges && depth_ == mode_depth_ + 1) {  // one half of ["a", "b"]
      pair_.push_back(std::move(v));
      return true;
    }
    if (mode_ != Mode::None) return bad("model: unexpected string in vocab");
    return value(json(std::move(v)));
  }

  bool start_object(std::size_t) override {
    ++depth_;
    if (mode_ == Mode::None && in_model() && key_ == "vocab") {
      mode_ = Mode::Vocab;
      mode_depth_ = depth_;
      return true;
    }
    if (mode_ != Mode::None) return bad("model: unexpected object in vocab or merges");
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      token_ = std::move(k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    --depth_;
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::None;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (mode_ == Mode::None && in_model() && key_ == "merges") {
      mode_ = Mode::Merges;
      mode_depth_ = depth_;
      return true;
    }
    if (mode_ == Mode::Merges && depth_ == mode_depth_ + 1) {
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::None) return bad("model: unexpected array in vocab or merges");
    return open(json::array());
  }
  bool end_array() override {
    --depth_;
    if (mode_ == Mode::Merges) {
      if (depth_ + 1 == mode_depth_) {  // the merges array itself
        mode_ = Mode::None;
        return true;
      }
      if (pair_.size() != 2) return bad("model: a merge pair does not hold two tokens");
      out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    if (error.empty()) error = std::string("not valid JSON: ") + e.what();
    return false;
  }

 private:
  enum class Mode { None, Vocab, Merges };

  // True when the container being opened is a direct member of the top-level "model" object.
  bool in_model() const { return stack_.size() == 2 && model_open_; }

  bool bad(std::string message) {
    if (error.empty()) error = std::move(message);
    return false;
  }
  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX) return bad("model: vocab id of '" + token_ + "' is out of range");
    out_.vocab.emplace_back(std::move(token_), static_cast<TokenId>(id));
    return true;
  }
  json* put(json v) {
    if (stack_.empty()) {
      out_.doc = std::move(v);
      return &out_.doc;
    }
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }
  bool value(json v) {
    if (mode_ != Mode::None) return bad("model: unexpected value in vocab or merges");
    put(std::move(v));
    return true;
  }
  bool open(json container) {
    const bool is_model = stack_.size() == 1 && key_ == "model";
    stack_.push_back(put(std::move(container)));
    if (is_model) model_open_ = true;
    return true;
  }
  bool close() {
    if (stack_.size() == 2 && model_open_) model_open_ = false;
    stack_.pop_back();
    return true;
  }

  TokenizerJson& out_;
  std::vector<json*> stack_;  // open containers of the DOM being built
  std::string key_;           // last object key seen outside vocab
  bool model_open_ = false;   // the top-level "model" object is the innermost open container
  Mode mode_ = Mode::None;
  int depth_ = 0, mode_depth_ = 0;
  std::string token_;              // vocab key waiting for its id
  std::vector<std::string> pair_;  // merge pair being read
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("tokenizer: cannot open '{}'", path);
  std::string text(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size())))
    fail("tokenizer: cannot read '{}'", path);

  TokenizerJson out;
  Reader reader(out);
  const bool ok = json::sax_parse(text, &reader);
  if (!ok || !reader.error.empty()) {
    fail("tokenizer: '{}': {}", path, reader.error.empty() ? "not valid JSON" : reader.error);
  }
  return out;
}

TokenizerJson split_tokenizer_json(json doc) {
  TokenizerJson out;
  if (doc.is_object() && doc.contains("model") && doc["model"].is_object()) {
    json& model = doc["model"];
    if (const auto it = model.find("vocab"); it != model.end()) {
      if (!it->is_object()) fail("model: 'vocab' is not an object");
      out.vocab.reserve(it->size());
      for (auto& [token, id] : it->items()) {
        if (!id.is_number_integer()) fail("model: vocab id of '{}' is not an integer", token);
        out.vocab.emplace_back(token, id.get<TokenId>());
      }
      model.erase(it);
    }
    if (const auto it = model.find("merges"); it != model.end()) {
      if (!it->is_array()) fail("model: 'merges' is not an array");
      for (const auto& merge : *it) {
        if (merge.is_string()) {
          auto pair = split_merge(merge.get<std::string>());
          if (!pair)
            fail("model: merge '{}' is not two tokens separated by one space",
                 merge.get<std::string>());
          out.merges.push_back(std::move(*pair));
        } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
                   merge[1].is_string()) {
          out.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
        } else {
          fail("model: a merge is neither \"a b\" nor [\"a\", \"b\"]");
        }
      }
      model.erase(it);
    }
  }
  out.doc = std::move(doc);
  return out;
}

}  // namespace dspark
