// The SentencePiece library, reached through a small shared shim loaded at run time (see
// sentencepiece_shim/shim.cpp for why it cannot be linked directly next to LibTorch).
// Method names follow sentencepiece::SentencePieceProcessor.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dspark {

class SentencePieceModel {
 public:
  // Throws dspark::Error "PATH: reason" when the file cannot be read or parsed.
  static std::unique_ptr<SentencePieceModel> load(const std::string& path);
  // SentencePieceTrainer::Train with its "--input=... --model_prefix=..." argument string.
  static void train(const std::string& arguments);
  ~SentencePieceModel();

  int GetPieceSize() const { return int(pieces_.size()); }
  const std::string& IdToPiece(int id) const { return pieces_.at(size_t(id)); }
  int PieceToId(std::string_view piece) const;
  bool IsControl(int id) const { return flags_.at(size_t(id)) & 1; }
  bool IsUnknown(int id) const { return flags_.at(size_t(id)) & 2; }
  bool IsByte(int id) const { return flags_.at(size_t(id)) & 4; }
  bool IsUnused(int id) const { return flags_.at(size_t(id)) & 8; }
  int unk_id() const { return special_[0]; }
  int bos_id() const { return special_[1]; }
  int eos_id() const { return special_[2]; }
  int pad_id() const { return special_[3]; }
  // Throws dspark::Error on failure.
  std::vector<int> Encode(std::string_view text) const;
  std::string DecodeIds(const std::vector<int>& ids) const;

 private:
  SentencePieceModel() = default;
  void* handle_ = nullptr;
  std::vector<std::string> pieces_;
  std::vector<int> flags_;
  int special_[4] = {-1, -1, -1, -1};
};

}  // namespace dspark
