#include "tokenizer/sentencepiece_library.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "util/error.h"

#ifndef DSPARK_SENTENCEPIECE_SHIM
#define DSPARK_SENTENCEPIECE_SHIM "libdspark_sentencepiece.so"
#endif

namespace dspark {
namespace {

struct ShimApi {
  void* (*load)(const char*, char*, size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int (*piece_size)(void*) = nullptr;
  const char* (*id_to_piece)(void*, int) = nullptr;
  int (*piece_to_id)(void*, const char*, size_t) = nullptr;
  int (*piece_flags)(void*, int) = nullptr;
  void (*special_ids)(void*, int*) = nullptr;
  int (*encode)(void*, const char*, size_t, int*, int, char*, size_t) = nullptr;
  int (*decode)(void*, const int*, int, char*, int) = nullptr;
  int (*train)(const char*, char*, size_t) = nullptr;
};

template <typename Fn>
void bind(void* library, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (!fn) fail("SentencePiece shim lacks symbol {}", name);
}

// The shim sits next to the executable, or where the build put it.
const ShimApi& shim() {
  static ShimApi api;
  static std::once_flag once;
  static std::string load_error;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back((exe.parent_path() / "libdspark_sentencepiece.so").string());
    candidates.push_back(DSPARK_SENTENCEPIECE_SHIM);
    void* library = nullptr;
    for (const auto& path : candidates) {
      library = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library) break;
      load_error = dlerror();
    }
    if (!library) return;
    bind(library, "dspark_spm_load", api.load);
    bind(library, "dspark_spm_free", api.free);
    bind(library, "dspark_spm_piece_size", api.piece_size);
    bind(library, "dspark_spm_id_to_piece", api.id_to_piece);
    bind(library, "dspark_spm_piece_to_id", api.piece_to_id);
    bind(library, "dspark_spm_piece_flags", api.piece_flags);
    bind(library, "dspark_spm_special_ids", api.special_ids);
    bind(library, "dspark_spm_encode", api.encode);
    bind(library, "dspark_spm_decode", api.decode);
    bind(library, "dspark_spm_train", api.train);
  });
  if (!api.load) fail("cannot load the SentencePiece shim library ({})", load_error);
  return api;
}

}  // namespace

std::unique_ptr<SentencePieceModel> SentencePieceModel::load(const std::string& path) {
  const ShimApi& api = shim();
  if (!std::filesystem::exists(path)) fail("{}: no such file", path);
  char error[512] = {0};
  void* handle = api.load(path.c_str(), error, sizeof error);
  if (!handle) fail("{}: not a valid SentencePiece model ({})", path, error);
  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel());
  model->handle_ = handle;
  const int n = api.piece_size(handle);
  model->pieces_.reserve(size_t(n));
  model->flags_.reserve(size_t(n));
  for (int id = 0; id < n; ++id) {
    model->pieces_.emplace_back(api.id_to_piece(handle, id));
    model->flags_.push_back(api.piece_flags(handle, id));
  }
  api.special_ids(handle, model->special_);
  return model;
}

void SentencePieceModel::train(const std::string& arguments) {
  char error[512] = {0};
  if (!shim().train(arguments.c_str(), error, sizeof error)) fail("SentencePiece training failed: {}", error);
}

SentencePieceModel::~SentencePieceModel() {
  if (handle_) shim().free(handle_);
}

int SentencePieceModel::PieceToId(std::string_view piece) const {
  return shim().piece_to_id(handle_, piece.data(), piece.size());
}

std::vector<int> SentencePieceModel::Encode(std::string_view text) const {
  std::vector<int> ids(text.size() + 16);
  char error[512] = {0};
  int n = shim().encode(handle_, text.data(), text.size(), ids.data(), int(ids.size()), error, sizeof error);
  if (n < 0) fail("SentencePiece encode failed: {}", error);
  if (n > int(ids.size())) {
    ids.resize(size_t(n));
    n = shim().encode(handle_, text.data(), text.size(), ids.data(), int(ids.size()), error, sizeof error);
  }
  ids.resize(size_t(n));
  return ids;
}

std::string SentencePieceModel::DecodeIds(const std::vector<int>& ids) const {
  std::string text(ids.size() * 8 + 16, '\0');
  int n = shim().decode(handle_, ids.data(), int(ids.size()), text.data(), int(text.size()));
  if (n < 0) fail("SentencePiece decode failed");
  if (n > int(text.size())) {
    text.resize(size_t(n));
    n = shim().decode(handle_, ids.data(), int(ids.size()), text.data(), int(text.size()));
  }
  text.resize(size_t(n));
  return text;
}

}  // namespace dspark
