// Chat templates for the OpenAI-compatible server: turning /v1/chat/completions messages into
// the prompt string a model was trained on, by rendering the model's Hugging Face chat template
// (the Jinja `chat_template` of tokenizer_config.json) the way transformers'
// apply_chat_template does: jinja2 with trim_blocks and lstrip_blocks, the variables
// `messages`, `add_generation_prompt` and the special tokens, and the globals
// `raise_exception(message)` and `strftime_now(format)`. The Jinja engine is the small subset in
// jinja_*.h, enough for the Qwen3, Llama-3, Gemma-3 and Llama-2 templates; a template using
// anything else fails to parse or render with a one-line error rather than producing a wrong
// prompt.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/jinja_template.h"

namespace dspark::serve {

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // Parses a Jinja template; throws dspark::Error (one line, with the position) on syntax
  // outside the subset.
  static ChatTemplate parse(const std::string& source);

  // Renders with `messages`, `add_generation_prompt`, and extra variables (e.g. bos_token,
  // eos_token) from `extra` (a JSON object). Throws dspark::Error when the template calls
  // raise_exception(msg) (the message is the template's, verbatim) or on evaluation errors.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const nlohmann::json& extra = nlohmann::json::object()) const;

 private:
  jinja::Template template_;  // cheap to copy: shares the parsed tree
};

// The template for models that have none (base and code models). Every message becomes
// "### <Role>:\n<content>\n\n" with the role capitalized ("### System:", "### User:",
// "### Assistant:"), and the generation prompt is "### Assistant:\n". For example
// [system "Be brief.", user "Hi"] with the generation prompt renders as
//   "### System:\nBe brief.\n\n### User:\nHi\n\n### Assistant:\n"
extern const char* const kPlainChatTemplate;

struct ModelChatTemplate {
  ChatTemplate chat_template;
  nlohmann::json extra;  // bos_token / eos_token / unk_token / pad_token when the config has them
  bool is_plain = false;  // the model has no template of its own: kPlainChatTemplate
};

// A model directory's template: `chat_template.jinja` when present (newer transformers save it
// there), else tokenizer_config.json's "chat_template" (a string, or a list of
// {"name", "template"} of which "default" is used). The special tokens come from
// tokenizer_config.json (string or {"content": ...} forms). When neither file has a template,
// kPlainChatTemplate. Throws dspark::Error naming the file when it is malformed or its template
// is outside the supported subset.
ModelChatTemplate load_chat_template(const std::string& model_dir);

}  // namespace dspark::serve
