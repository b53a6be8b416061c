// Drafter checkpoints in Hugging Face layout, as DeepSeek's DeepSpec (`Qwen3DSparkModel`: DSpark
// and DFlash drafters, anchor-first) and z-lab (`DFlashDraftModel`: slot k predicts its own
// position) publish them: config.json + safetensors with unprefixed parameter names. They map onto
// the native DSparkDrafter (target_width, mask_token_id, sample_from_anchor; see docs/interop.md):
// the same model, other names.
#pragma once
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "drafter/dspark_drafter.h"

namespace dspark {

enum class HfDrafterLayout { DeepSpec, ZlabDFlash };

HfDrafterLayout parse_hf_drafter_layout(const std::string& name);  // deepspec | zlab-dflash
const char* hf_drafter_layout_name(HfDrafterLayout layout);

// A directory with config.json naming a DeepSpec or z-lab drafter architecture (and no dspark.json).
// Returns its layout, or nothing for anything else.
std::optional<HfDrafterLayout> detect_hf_drafter(const std::string& dir);

struct HfDrafter {
  std::unique_ptr<DSparkDrafter> drafter;
  c10::ScalarType dtype = c10::kFloat;  // kBFloat16 when every stored tensor is bf16
};

// Reads a drafter directory of `layout` for `target`. One-line dspark::Error naming the file (and
// the tensor or key) for: another target (hidden size, vocabulary, layer count, layer ids, or
// stored embedding / LM head that differ from the target's), missing or unexpected tensors, wrong
// shapes, an unknown markov_head_type and options this engine does not implement.
HfDrafter read_hf_drafter(const std::string& dir, HfDrafterLayout layout, Transformer& target);

// A native drafter directory (dspark.json) or a DeepSpec / z-lab one, whichever `dir` is.
std::unique_ptr<DSparkDrafter> load_drafter_dir(const std::string& dir, Transformer& target);

// Writes `drafter` in DeepSpec's layout: config.json = the target's config.json (from
// `target_dir`) with the drafter's geometry and DeepSpec's keys, and safetensors with DeepSpec's
// names, including the copies of the target's embed_tokens and lm_head DeepSpec stores; sharded
// (model-0000i-of-0000n + index) above `max_shard_bytes` (0: one file). The drafter must use the
// DeepSpec layout (target_width, a mask token, anchor-first, `layers` context) and predict the
// whole vocabulary (DeepSpec has no d2t).
void write_deepspec(const DSparkDrafter& drafter, Transformer& target, const std::string& target_dir,
                    const std::string& out_dir, c10::ScalarType dtype, size_t max_shard_bytes);

// DeepSpec's parameter name for a native one; empty for native parameters DeepSpec has no place
// for (embed.proj, mask, out.proj).
std::string deepspec_name(const std::string& native_name);

}  // namespace dspark
