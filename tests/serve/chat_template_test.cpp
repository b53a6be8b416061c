// Chat templates: golden renderings of real model templates (made by jinja2, see
// scripts/gen-chat-template-vectors.py), the Jinja subset's semantics, and loading a model
// directory's template.
#include "serve/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/error.h"

#ifndef DSPARK_SOURCE_DIR
#define DSPARK_SOURCE_DIR "."
#endif

namespace dspark::serve {
namespace {

namespace fs = std::filesystem;

const fs::path kDataDir = fs::path(DSPARK_SOURCE_DIR) / "tests" / "data" / "chat_template";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Renders `source` with no messages: for evaluator tests whose template uses its own data.
std::string render(const std::string& source, const nlohmann::json& extra = nlohmann::json::object()) {
  return ChatTemplate::parse(source).render({}, false, extra);
}

std::string parse_error(const std::string& source) {
  try {
    ChatTemplate::parse(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string render_error(const std::string& source, const nlohmann::json& extra = nlohmann::json::object()) {
  try {
    render(source, extra);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- golden vectors of the real templates ----

TEST(ChatTemplateGolden, MatchesJinja2OnRealTemplates) {
  const auto golden = nlohmann::json::parse(read_text(kDataDir / "golden.json"));
  std::map<std::string, ChatTemplate> templates;
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const std::string name = c["template"];
    if (!templates.count(name)) {
      templates.emplace(name, ChatTemplate::parse(read_text(kDataDir / (name + ".jinja"))));
    }
    std::vector<ChatMessage> messages;
    for (const auto& m : golden["conversations"][c["conversation"].get<std::string>()]) {
      messages.push_back({m["role"], m["content"]});
    }
    const std::string label = fmt::format("{} / {} / add_generation_prompt={}", name,
                                          c["conversation"].get<std::string>(),
                                          c["add_generation_prompt"].get<bool>());
    const auto& chat_template = templates.at(name);
    if (c.contains("expected")) {
      EXPECT_EQ(chat_template.render(messages, c["add_generation_prompt"], c["extra"]),
                c["expected"].get<std::string>())
          << label;
    } else {
      try {
        chat_template.render(messages, c["add_generation_prompt"], c["extra"]);
        ADD_FAILURE() << label << ": expected an error";
      } catch (const Error& e) {
        // A template's raise_exception message reaches the caller verbatim.
        if (c["raised_by_template"]) {
          EXPECT_EQ(e.what(), c["error"].get<std::string>()) << label;
        }
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 60);
  EXPECT_EQ(templates.size(), 4u);
}

// ---- the Jinja subset ----

TEST(JinjaSubset, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a\n{%- if true -%}\n b \n{%- endif %}\nc"), "abc");
  EXPECT_EQ(render("a\n{%- if true -%}\n b \n{%- endif %}\n\nc"), "ab\nc");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before it.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y"), "  x\n  y");
  EXPECT_EQ(render("a  {# comment #}\nb"), "a  b");
  EXPECT_EQ(render("{{ 'x' }}\n"), "x");            // one trailing newline is dropped
  EXPECT_EQ(render("{{ 'x' }}\n\n"), "x\n");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");  // '+' keeps the indent
  EXPECT_EQ(render("{{ {'a': {'b': 1}}['a']['b'] }}"), "1");  // '}}' inside a dict literal
}

TEST(JinjaSubset, LoopsAndScoping) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index0 }}{{ loop.index }}{{ x }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "01aTrueFalse3;12bFalseFalse3;23cFalseTrue3;");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"),
            "a=1 b=2 ");
  EXPECT_EQ(render("{% for x in range(6) if x is odd %}{{ x }}{% endfor %}"), "135");
  EXPECT_EQ(render("{% for x in range(9) %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "013");
  // A `set` inside a loop stays in that iteration, like jinja2.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"),
            "221");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% if i == 1 %}{% set y = 'a' %}{% endif %}[{{ y }}]"
                   "{% endfor %}"),
            "[a][]");
}

TEST(JinjaSubset, Namespace) {
  EXPECT_EQ(render("{% set ns = namespace(found=false, n=0) %}{% for x in [1, 2, 3] %}"
                   "{% if x > 1 %}{% set ns.found = true %}{% set ns.n = ns.n + x %}{% endif %}"
                   "{% endfor %}{{ ns.found }} {{ ns.n }}"),
            "True 5");
  EXPECT_NE(render_error("{% set s = 'x' %}{% set s.a = 1 %}").find("only namespace()"),
            std::string::npos);
}

TEST(JinjaSubset, ExpressionsAndOperators) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'a' * 3 }} {{ 4 / 2 }}"),
            "3 -4 2 1024 aaa 2.0");
  EXPECT_EQ(render("{{ 'x' ~ 1 ~ none }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}"), "x1None 7 9");
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ true == 1 }} {{ 1 < 2 < 3 }} {{ 'b' > 'a' }}"),
            "True True True True");
  EXPECT_EQ(render("{{ 'a' in 'cab' }} {{ 1 not in [1] }} {{ 'k' in {'k': 1} }}"),
            "True False True");
  EXPECT_EQ(render("{{ 'yes' if 1 > 2 else 'no' }}|{{ 'x' if false }}|"), "no||");
  EXPECT_EQ(render("{{ 0 or 'fallback' }} {{ 'a' and 'b' }} {{ not none }}"), "fallback b True");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }} {{ {'k': 'v'} }} {{ 1.5e20 }} {{ 0.0001 }}"),
            "[1, 'a', None, True] {'k': 'v'} 1.5e+20 0.0001");
  EXPECT_EQ(render("{{ (1, 'a') }} {{ (1,) }} {{ {'k': 1}.items() | list }}"),
            "(1, 'a') (1,) [('k', 1)]");
  EXPECT_EQ(render("{{ 'a' 'b' }}{{ \"\\n\" == '\\n' }}"), "abTrue");
}

TEST(JinjaSubset, AccessAndSlicing) {
  const nlohmann::json data = {{"m", {{"role", "user"}, {"content", "héllo"}}},
                               {"xs", {1, 2, 3, 4}}};
  EXPECT_EQ(render("{{ m['role'] }} {{ m.role }} {{ m.missing }}|{{ m.get('x', 'd') }}", data),
            "user user |d");
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[::-1] }} {{ xs[-1] }} {{ xs[1:3] }} {{ xs[::2] }}", data),
            "[2, 3, 4] [4, 3, 2, 1] 4 [2, 3] [1, 3]");
  EXPECT_EQ(render("{{ m.content[1:3] }} {{ m.content[::-1] }} {{ m.content | length }}", data),
            "él olléh 5");
  EXPECT_EQ(render("{{ xs[10] }}|", data), "|");  // out of range is undefined, like jinja2
}

TEST(JinjaSubset, UndefinedAndTests) {
  EXPECT_EQ(render("[{{ nothing }}]{{ nothing is defined }}{{ nothing is undefined }}"
                   "{% if nothing %}x{% endif %}{{ nothing | length }}"),
            "[]FalseTrue0");
  EXPECT_EQ(render("{{ none is none }} {{ 'a' is string }} {{ 3 is divisibleby 3 }} "
                   "{{ false is false }} {{ 1 is not string }} {{ [] is iterable }} {{ {} is mapping }}"),
            "True True True True True True True");
  EXPECT_NE(render_error("{{ nothing.attr }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(render_error("{{ nothing + 'a' }}").find("'nothing' is undefined"), std::string::npos);
}

TEST(JinjaSubset, FiltersAndMethods) {
  EXPECT_EQ(render("{{ '  a b  ' | trim }}|{{ 'Ab' | upper }}{{ 'Ab' | lower }}|{{ [3, 1] | first }}"
                   "{{ 'abc' | last }}|{{ [1, 2] | join(', ') }}|{{ 5 | string }}{{ x | default('d') }}"
                   "{{ '' | default('e', true) }}"),
            "a b|ABab|3c|1, 2|5de");
  EXPECT_EQ(render("{{ d | tojson }} {{ [1, 2] | tojson(indent=2) }}",
                   {{"d", {{"b", {1, 2.5, nullptr, true}}, {"a", "é<\"\n"}}}}),
            "{\"a\": \"é<\\\"\\n\", \"b\": [1, 2.5, null, true]} [\n  1,\n  2\n]");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} "
                   "{{ 'a,b'.split(',') }} {{ ' a  b '.split() }} {{ '\\nx\\n'.strip('\\n') }} "
                   "{{ 'xxa'.lstrip('x') }} {{ 'axx'.rstrip('x') }} {{ 'aXa'.replace('a', 'b') }}"),
            "True True ['a', 'b'] ['a', 'b'] x a a bXb");
  EXPECT_EQ(render("{{ xs | selectattr('role', 'equalto', 'user') | map(attribute='c') | join }}",
                   {{"xs", {{{"role", "user"}, {"c", "1"}}, {{"role", "x"}, {"c", "2"}},
                            {{"role", "user"}, {"c", "3"}}}}}),
            "13");
}

TEST(JinjaSubset, ErrorsAreOneLineWithPosition) {
  EXPECT_EQ(parse_error("ab\n{% for x in y %}{{ x }}"),
            "chat template: line 2, column 1: unclosed 'for' block (expected 'else' or 'endfor' "
            "before the end of the template)");
  EXPECT_EQ(parse_error("{% if true %}x"),
            "chat template: line 1, column 1: unclosed 'if' block (expected 'elif' or 'else' or "
            "'endif' before the end of the template)");
  EXPECT_EQ(parse_error("{% macro m() %}{% endmacro %}"),
            "chat template: line 1, column 1: unsupported tag 'macro'");
  EXPECT_EQ(parse_error("{% endif %}"),
            "chat template: line 1, column 1: unexpected 'endif' (no open block it could close)");
  EXPECT_EQ(parse_error("{{ 'abc }}"), "chat template: line 1, column 4: unterminated string literal");
  EXPECT_EQ(parse_error("x {{ 1 + }}"), "chat template: line 1, column 10: expected an expression, got '}}'");
  EXPECT_EQ(parse_error("{{ 1 "), "chat template: line 1, column 1: unterminated '{{'");
  EXPECT_EQ(parse_error("{% break %}"), "chat template: line 1, column 1: 'break' outside a for loop");
  EXPECT_EQ(render_error("\n  {{ 'a' | bogus }}"),
            "chat template: line 2, column 12: unknown filter 'bogus'");
  EXPECT_EQ(render_error("{{ 1 is bogus }}"), "chat template: line 1, column 9: unknown test 'bogus'");
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"),
            "chat template: line 1, column 8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(render_error("{{ '%s' % 1 }}"),
            "chat template: line 1, column 9: printf-style string formatting is not supported");
  EXPECT_EQ(render_error("{{ raise_exception('Only user and assistant roles') }}"),
            "Only user and assistant roles");
}

TEST(ChatTemplate, RendersMessagesAndExtraVariables) {
  const auto t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  EXPECT_EQ(t.render({{"user", "hi"}}, true, {{"bos_token", "<s>"}}), "<s><user>hi<assistant>");
  const ChatTemplate copy = t;  // copies share the parsed template
  EXPECT_EQ(copy.render({{"user", "hi"}}, false), "<user>hi");
}

TEST(ChatTemplate, PlainTemplate) {
  const auto plain = ChatTemplate::parse(kPlainChatTemplate);
  EXPECT_EQ(plain.render({{"system", "Be brief."}, {"user", "Hi"}}, true),
            "### System:\nBe brief.\n\n### User:\nHi\n\n### Assistant:\n");
  EXPECT_EQ(plain.render({{"user", "Hi"}, {"assistant", "Hello"}}, false),
            "### User:\nHi\n\n### Assistant:\nHello\n\n");
}

// ---- load_chat_template ----

class LoadChatTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("dspark_chat_template_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       static_cast<long>(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  fs::path dir_;
};

TEST_F(LoadChatTemplate, NoConfigMeansPlainTemplate) {
  const auto loaded = load_chat_template(dir_.string());
  EXPECT_TRUE(loaded.is_plain);
  EXPECT_EQ(loaded.chat_template.render({{"user", "Hi"}}, true), "### User:\nHi\n\n### Assistant:\n");
}

TEST_F(LoadChatTemplate, ConfigWithoutTemplateKeepsSpecialTokens) {
  write("tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  const auto loaded = load_chat_template(dir_.string());
  EXPECT_TRUE(loaded.is_plain);
  EXPECT_EQ(loaded.extra, (nlohmann::json{{"bos_token", "<s>"}, {"eos_token", "</s>"}}));
}

TEST_F(LoadChatTemplate, StringTemplate) {
  write("tokenizer_config.json",
        R"({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}",
            "bos_token": "<s>", "eos_token": {"content": "</s>"}})");
  const auto loaded = load_chat_template(dir_.string());
  EXPECT_FALSE(loaded.is_plain);
  EXPECT_EQ(loaded.chat_template.render({{"user", "a"}, {"assistant", "b"}}, false, loaded.extra),
            "<s>a</s>b</s>");
}

TEST_F(LoadChatTemplate, ListTemplateUsesDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "tools"},
                              {"name": "default", "template": "default:{{ messages[0].content }}"}]})");
  const auto loaded = load_chat_template(dir_.string());
  EXPECT_FALSE(loaded.is_plain);
  EXPECT_EQ(loaded.chat_template.render({{"user", "x"}}, false), "default:x");
}

TEST_F(LoadChatTemplate, ChatTemplateJinjaFileWins) {
  write("tokenizer_config.json", R"({"chat_template": "from config"})");
  write("chat_template.jinja", "from file\n");
  EXPECT_EQ(load_chat_template(dir_.string()).chat_template.render({}, false), "from file");
}

TEST_F(LoadChatTemplate, MalformedFilesNameTheFile) {
  const std::string config = (dir_ / "tokenizer_config.json").string();
  write("tokenizer_config.json", "{\"chat_template\": ");
  try {
    load_chat_template(dir_.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(config + ": malformed JSON")) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  EXPECT_THROW(load_chat_template(dir_.string()), Error);
  write("tokenizer_config.json", R"({"chat_template": "{% for x in y %}"})");
  try {
    load_chat_template(dir_.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(config + ": chat template: line 1")) << e.what();
  }
}

}  // namespace
}  // namespace dspark::serve
