// A tiny C interface over the SentencePiece library, built as its own shared library and loaded
// into its own link-map namespace (dlmopen) by sentencepiece_library.cpp.
//
// Why: Debian's libsentencepiece embeds its own copy of protobuf-lite and exports those symbols,
// while LibTorch links the full libprotobuf. Linked into one process, SentencePiece's internal
// protobuf calls bind to LibTorch's libprotobuf and the process crashes during static
// initialisation. In a namespace of its own, SentencePiece binds to its own copy (RTLD_DEEPBIND
// is not enough: the trainer's logging then reaches an uninitialised copy of std::cerr). Only C
// types cross the boundary, and each side frees only what it allocated.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

void copy_message(const std::string& message, char* out, size_t capacity) {
  if (!out || capacity == 0) return;
  std::snprintf(out, capacity, "%s", message.c_str());
}

}  // namespace

extern "C" {

void* dspark_spm_load(const char* path, char* error, size_t error_capacity) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->Load(path);
  if (!status.ok()) {
    copy_message(status.ToString(), error, error_capacity);
    delete sp;
    return nullptr;
  }
  return sp;
}

void dspark_spm_free(void* handle) { delete static_cast<sentencepiece::SentencePieceProcessor*>(handle); }

int dspark_spm_piece_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

// The returned pointer stays valid as long as the model is loaded.
const char* dspark_spm_id_to_piece(void* handle, int id) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->IdToPiece(id).c_str();
}

int dspark_spm_piece_to_id(void* handle, const char* piece, size_t length) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->PieceToId(std::string(piece, length));
}

// Bit 0: control, 1: unknown, 2: byte, 3: unused.
int dspark_spm_piece_flags(void* handle, int id) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  return (sp->IsControl(id) ? 1 : 0) | (sp->IsUnknown(id) ? 2 : 0) | (sp->IsByte(id) ? 4 : 0) |
         (sp->IsUnused(id) ? 8 : 0);
}

// out[0..3] = unk, bos, eos, pad (-1 when absent).
void dspark_spm_special_ids(void* handle, int* out) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  out[0] = sp->unk_id();
  out[1] = sp->bos_id();
  out[2] = sp->eos_id();
  out[3] = sp->pad_id();
}

// Returns the number of ids (written up to `capacity`), or -1 with `error` set.
int dspark_spm_encode(void* handle, const char* text, size_t length, int* out, int capacity,
                      char* error, size_t error_capacity) {
  std::vector<int> ids;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(std::string(text, length), &ids);
  if (!status.ok()) {
    copy_message(status.ToString(), error, error_capacity);
    return -1;
  }
  for (int i = 0; i < int(ids.size()) && i < capacity; ++i) out[i] = ids[i];
  return int(ids.size());
}

// Returns the decoded length (written up to `capacity`), or -1.
int dspark_spm_decode(void* handle, const int* ids, int n, char* out, int capacity) {
  std::string text;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(std::vector<int>(ids, ids + n), &text);
  if (!status.ok()) return -1;
  std::memcpy(out, text.data(), std::min<size_t>(text.size(), size_t(std::max(capacity, 0))));
  return int(text.size());
}

// Trains a model with SentencePiece's command-line style arguments. Returns 1 on success.
int dspark_spm_train(const char* arguments, char* error, size_t error_capacity) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(arguments);
  if (!status.ok()) copy_message(status.ToString(), error, error_capacity);
  return status.ok() ? 1 : 0;
}

}  // extern "C"
