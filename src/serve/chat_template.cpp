#include "serve/chat_template.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace dspark::serve {

const char* const kPlainChatTemplate =
    "{% for message in messages %}"
    "{{ '### ' + message.role | capitalize + ':\\n' + message.content + '\\n\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Assistant:\\n' }}{% endif %}";

namespace {

// The globals transformers adds to the jinja2 environment of chat templates.
jinja::Dict transformers_globals() {
  jinja::Dict globals;
  globals.emplace_back("raise_exception",
                       jinja::Value::function("raise_exception", [](const jinja::CallArgs& args) {
                         // The template's own message, verbatim: the server reports it as the
                         // reason a request was rejected.
                         if (args.positional.size() != 1 || !args.positional[0].is_string()) {
                           throw jinja::EvalError("raise_exception() takes one string");
                         }
                         throw Error(args.positional[0].as_string());
                         return jinja::Value();
                       }));
  globals.emplace_back("strftime_now",
                       jinja::Value::function("strftime_now", [](const jinja::CallArgs& args) {
                         if (args.positional.size() != 1 || !args.positional[0].is_string()) {
                           throw jinja::EvalError("strftime_now() takes one format string");
                         }
                         const std::time_t now = std::time(nullptr);
                         std::tm local{};
                         localtime_r(&now, &local);
                         char buffer[256];
                         const std::string& format = args.positional[0].as_string();
                         const size_t n =
                             std::strftime(buffer, sizeof buffer, format.c_str(), &local);
                         return jinja::Value(std::string(buffer, n));
                       }));
  return globals;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A special token written as "<s>" or as {"content": "<s>", ...} (transformers' AddedToken).
void copy_special_token(const nlohmann::json& config, const char* key, const std::string& file,
                        nlohmann::json& extra) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return;
  if (it->is_string()) {
    extra[key] = *it;
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    extra[key] = (*it)["content"];
  } else {
    fail("{}: '{}' must be a string or an object with a string \"content\"", file, key);
  }
}

ChatTemplate parse_in_file(const std::string& source, const std::string& file) {
  try {
    return ChatTemplate::parse(source);
  } catch (const Error& e) {
    fail("{}: {}", file, e.what());
  }
}

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& source) {
  ChatTemplate result;
  result.template_ = jinja::Template::parse(source);
  return result;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, const nlohmann::json& extra) const {
  if (!extra.is_object()) fail("chat template: extra variables must be a JSON object");
  jinja::Dict variables = transformers_globals();
  for (const auto& [key, value] : extra.items()) {
    variables.emplace_back(key, jinja::Value::from_json(value));
  }
  jinja::List message_list;
  for (const auto& message : messages) {
    message_list.emplace_back(jinja::Dict{{"role", message.role}, {"content", message.content}});
  }
  variables.emplace_back("messages", std::move(message_list));
  variables.emplace_back("add_generation_prompt", add_generation_prompt);
  return template_.render(variables);
}

ModelChatTemplate load_chat_template(const std::string& model_dir) {
  namespace fs = std::filesystem;
  ModelChatTemplate result{ChatTemplate::parse(kPlainChatTemplate), nlohmann::json::object(), true};
  const fs::path config_path = fs::path(model_dir) / "tokenizer_config.json";
  const std::string config_file = config_path.string();
  std::string source;
  bool has_template = false;
  if (fs::exists(config_path)) {
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(read_file(config_path));
    } catch (const nlohmann::json::exception& e) {
      fail("{}: malformed JSON: {}", config_file, e.what());
    }
    if (!config.is_object()) fail("{}: expected a JSON object", config_file);
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
      copy_special_token(config, key, config_file, result.extra);
    }
    const auto it = config.find("chat_template");
    if (it != config.end() && !it->is_null()) {
      if (it->is_string()) {
        source = it->get<std::string>();
      } else if (it->is_array()) {
        for (const auto& entry : *it) {
          if (entry.is_object() && entry.value("name", nlohmann::json()) == "default") {
            if (!entry.contains("template") || !entry["template"].is_string()) {
              fail("{}: the \"default\" chat_template has no string \"template\"", config_file);
            }
            source = entry["template"].get<std::string>();
            has_template = true;
          }
        }
        if (!has_template) {
          fail("{}: chat_template list has no entry named \"default\"", config_file);
        }
      } else {
        fail("{}: chat_template must be a string or a list of {{name, template}}", config_file);
      }
      has_template = true;
    }
  }
  const fs::path jinja_path = fs::path(model_dir) / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    source = read_file(jinja_path);
    result.chat_template = parse_in_file(source, jinja_path.string());
    result.is_plain = false;
  } else if (has_template) {
    result.chat_template = parse_in_file(source, config_file);
    result.is_plain = false;
  }
  return result;
}

}  // namespace dspark::serve
