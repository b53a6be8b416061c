// Decoders: turn the vocabulary strings of a list of tokens back into text (ByteLevel maps the
// byte-level alphabet back to bytes; Replace("▁" -> " ") + ByteFallback + Fuse + Strip undo
// SentencePiece-style encoding). They work on a list of strings so each step can act per token
// (e.g. Strip on the first one) as HF's decode_chain does.
//
// Unlike HF, decoders here never replace bytes that are not valid UTF-8 by U+FFFD: decode()
// returns raw bytes so that a StreamingDecoder can wait for the rest of a split character.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dspark {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// Builds the decoder a tokenizer.json "decoder" object describes; nullptr for null.
// Supported: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config);

}  // namespace dspark
