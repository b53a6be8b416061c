// dspark serve end to end on a loopback port, with the shipped default model and its DSpark
// drafter: the OpenAI shapes (JSON and SSE), errors, stop strings, cancellation on disconnect,
// queueing, metrics that reconcile with the responses, and a bounded load test in which every
// greedy output equals the single-request output.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <fmt/ranges.h>

#include "engine/drafter_factory.h"
#include "engine/engine.h"
#include "io/prompts_file.h"
#include "serve/server.h"
#include "spec/speculative.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {
namespace {
using json = nlohmann::json;

const std::string kModel = std::string(DSPARK_SOURCE_DIR) + "/models/default-small";
const std::string kDrafter = std::string(DSPARK_SOURCE_DIR) + "/models/default-small-dspark";

struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

// One running server (engine + HTTP) over the suite's model.
struct Running {
  Running(Transformer& target, const Tokenizer& tokenizer, const DrafterFactory& drafters, SpecOptions base,
          EngineOptions eo)
      : engine(target, drafters, base, eo),
        server(engine, target, tokenizer, load_chat_template(kModel), base.eos_ids, ServerOptions{"127.0.0.1", 0}) {
    port = server.start();
  }
  ~Running() {
    engine.shutdown(false, std::chrono::milliseconds(0));
    server.stop();
  }
  Reply post(const std::string& path, const std::string& body) const {
    return reply(client().Post(path.c_str(), body, "application/json"));
  }
  Reply post(const std::string& path, const json& body) const { return post(path, body.dump()); }
  Reply get(const std::string& path) const { return reply(client().Get(path.c_str())); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }
  static Reply reply(const httplib::Result& res) {
    Reply r;
    if (!res) {
      r.raw = "no response: " + httplib::to_string(res.error());
      return r;
    }
    r.status = res->status;
    r.raw = res->body;
    r.body = json::parse(res->body, nullptr, false);
    return r;
  }
  Engine engine;
  Server server;
  int port = 0;
};

// The payloads of an SSE body ("data: ..." events).
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return events;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One thread: the model is loaded here and run on the engine's worker, and two OpenMP pools
    // on a 2-core machine make every parallel region slow (EngineOptions::own_thread).
    at::set_num_threads(1);
    target = Transformer::load(kModel).release();
    tokenizer = Tokenizer::load(kModel).release();
    eos = target->config().eos_token_ids;
    for (TokenId id : tokenizer->eos_ids()) eos.push_back(id);
    dspark = new DrafterFactory({kDrafter, "", ""}, *target);
  }
  static void TearDownTestSuite() {
    delete dspark;
    delete tokenizer;
    delete target;
  }
  SpecOptions base() const {
    SpecOptions o;
    o.eos_ids = eos;
    return o;
  }
  // Plain greedy decoding of the text prompt, alone: the reference every server output must equal.
  std::string reference(const std::string& prompt, int64_t max_new) const {
    std::vector<TokenId> ids = tokenizer->encode(prompt, true);
    SpecOptions o = base();
    o.max_new_tokens = max_new;
    SpecResult r = generate_speculative(*target, nullptr, std::vector<int64_t>(ids.begin(), ids.end()), o);
    std::vector<TokenId> shown;
    for (int64_t t : r.tokens)
      if (std::find(eos.begin(), eos.end(), t) == eos.end()) shown.push_back(TokenId(t));
    return tokenizer->decode(shown);
  }
  static Transformer* target;
  static Tokenizer* tokenizer;
  static std::vector<int64_t> eos;
  static DrafterFactory* dspark;
};
Transformer* ServerTest::target = nullptr;
Tokenizer* ServerTest::tokenizer = nullptr;
std::vector<int64_t> ServerTest::eos;
DrafterFactory* ServerTest::dspark = nullptr;

TEST_F(ServerTest, EndpointsAndResponseShapes) {
  Running s(*target, *tokenizer, *dspark, base(), EngineOptions{});
  EXPECT_EQ(s.get("/health").body, json({{"status", "ok"}}));
  Reply models = s.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["object"], "list");
  EXPECT_EQ(models.body["data"][0]["meta"]["n_vocab"], 8192);

  Reply tok = s.post("/tokenize", json{{"content", "def main():"}});
  ASSERT_EQ(tok.status, 200);
  Reply detok = s.post("/detokenize", json{{"tokens", tok.body["tokens"]}});
  EXPECT_EQ(detok.body["content"], "def main():");

  const std::string prompt = "def fibonacci(n):\n";
  Reply r = s.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "text_completion");
  EXPECT_EQ(r.body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(r.body["choices"][0]["text"], reference(prompt, 24));
  EXPECT_EQ(r.body["usage"]["completion_tokens"].get<int64_t>() + r.body["usage"]["prompt_tokens"].get<int64_t>(),
            r.body["usage"]["total_tokens"].get<int64_t>());
  const json& t = r.body["timings"];
  ASSERT_TRUE(t.contains("draft_n")) << t.dump();
  EXPECT_GE(t["draft_n"].get<int64_t>(), t["draft_n_accepted"].get<int64_t>());
  EXPECT_NEAR(t["tau"].get<double>(),
              1.0 + double(t["draft_n_accepted"].get<int64_t>()) / t["num_spec_steps"].get<double>(), 1e-9);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");

  // Streaming gives the same text; every chunk shares id and created; usage chunk before [DONE].
  Reply st = s.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0},
                                            {"stream", true}, {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(st.status, 200);
  std::vector<std::string> events = sse_events(st.raw);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  std::set<std::string> ids;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json e = json::parse(events[i]);
    ids.insert(e["id"].get<std::string>());
    text += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, r.body["choices"][0]["text"]);
  json last = json::parse(events[events.size() - 3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(last.contains("timings"));
  json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 24);
  EXPECT_EQ(ids.size(), 1u);

  // Chat: the plain template (the default model has none); first delta carries the role.
  json chat_req = {{"messages", {{{"role", "user"}, {"content", "Write a sort function."}}}}, {"max_tokens", 16},
                   {"temperature", 0}};
  Reply chat = s.post("/v1/chat/completions", chat_req);
  ASSERT_EQ(chat.status, 200) << chat.raw;
  EXPECT_EQ(chat.body["object"], "chat.completion");
  EXPECT_EQ(chat.body["choices"][0]["message"]["role"], "assistant");
  chat_req["stream"] = true;
  Reply chat_stream = s.post("/v1/chat/completions", chat_req);
  std::vector<std::string> chat_events = sse_events(chat_stream.raw);
  ASSERT_GE(chat_events.size(), 3u);
  json first = json::parse(chat_events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_FALSE(first.contains("timings"));
  std::string chat_text;
  for (size_t i = 1; i + 1 < chat_events.size(); ++i) {
    json e = json::parse(chat_events[i]);
    if (e["choices"][0]["delta"].contains("content")) chat_text += e["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(chat_text, chat.body["choices"][0]["message"]["content"]);
}

TEST_F(ServerTest, StopStringsCutTheTextAndEndTheRequest) {
  Running s(*target, *tokenizer, *dspark, base(), EngineOptions{});
  const std::string prompt = "import os\n\n\ndef list_files(path):\n";
  const std::string full = reference(prompt, 48);
  ASSERT_GT(full.size(), 12u);
  // Stop at a piece of the real continuation (chosen mid-way, crossing token boundaries).
  const std::string stop = full.substr(full.size() / 2, 3);
  const std::string expected = full.substr(0, full.find(stop));
  for (bool stream : {false, true}) {
    Reply r = s.post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0},
                                             {"stop", json::array({"\x01never", stop})}, {"stream", stream}});
    ASSERT_EQ(r.status, 200);
    std::string text;
    std::string finish;
    if (stream) {
      for (const auto& e : sse_events(r.raw)) {
        if (e == "[DONE]") continue;
        json j = json::parse(e);
        text += j["choices"][0]["text"].get<std::string>();
        if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
      }
    } else {
      text = r.body["choices"][0]["text"];
      finish = r.body["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, expected) << stream;
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(ServerTest, BadRequestsGetOpenAiShapedErrors) {
  EngineOptions eo;
  eo.context = 64;
  Running s(*target, *tokenizer, *dspark, base(), eo);
  auto expect_error = [&](const std::string& path, const std::string& body, int status, const std::string& type) {
    Reply r = s.post(path, body);
    EXPECT_EQ(r.status, status) << body << " -> " << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    EXPECT_EQ(r.body["error"]["type"], type) << body;
    EXPECT_EQ(r.body["error"]["code"], status);
    EXPECT_FALSE(r.body["error"]["message"].get<std::string>().empty());
  };
  const std::string c = "/v1/completions", chat = "/v1/chat/completions";
  expect_error(c, "{not json", 400, "invalid_request_error");
  expect_error(c, "[1, 2]", 400, "invalid_request_error");
  expect_error(c, R"({"max_tokens": 4})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "max_tokens": "many"})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "temperature": -1})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "top_p": 0})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "bogus_field": 1})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "stop": 5})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": "x", "n": 2})", 400, "invalid_request_error");
  expect_error(c, R"({"prompt": [1, 2, 99999]})", 400, "invalid_request_error");
  expect_error(chat, R"({"messages": "hi"})", 400, "invalid_request_error");
  expect_error(chat, R"({"messages": [123]})", 400, "invalid_request_error");
  expect_error(chat, R"({"messages": [{"role": "user"}]})", 400, "invalid_request_error");
  expect_error(chat, R"({"messages": [{"role": 5, "content": "x"}]})", 400, "invalid_request_error");
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "def f():\n    return 1\n";
  Reply over = s.post(c, json{{"prompt", long_prompt}});
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(over.body["error"]["type"], "exceed_context_size_error");
  EXPECT_EQ(over.body["error"]["n_ctx"], 64);
  // Huge max_tokens: generation ends at the context (finish_reason length), no error.
  Reply huge = s.post(c, json{{"prompt", "x = 1\n"}, {"max_tokens", 2000000000}, {"temperature", 0}});
  ASSERT_EQ(huge.status, 200) << huge.raw;
  EXPECT_LE(huge.body["usage"]["total_tokens"].get<int64_t>(), 64);
  Reply missing = s.get("/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["error"]["type"], "not_found_error");
  EXPECT_EQ(s.get("/v1/completions").status, 404);  // GET on a POST route
  // The server still answers.
  EXPECT_EQ(s.get("/health").status, 200);
}

TEST_F(ServerTest, ClientDisconnectMidStreamCancelsTheRequest) {
  Running s(*target, *tokenizer, *dspark, base(), EngineOptions{});
  const std::string body = json{{"prompt", "class Parser:\n"}, {"max_tokens", 1500}, {"temperature", 1.0},
                                {"stream", true}}.dump();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(s.port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), ssize_t(request.size()));
  std::string received;
  char buffer[256];
  while (received.find("data: ") == std::string::npos) {  // until the first generated text
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    ASSERT_GT(n, 0);
    received.append(buffer, size_t(n));
  }
  close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((s.engine.counters().processing > 0 ||
          s.get("/metrics").raw.find("dspark:requests_cancelled_total 1") == std::string::npos) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.engine.counters().processing, 0);
  EXPECT_EQ(s.engine.counters().requests_finished, 0);  // cancelled, not run to its 1500 tokens
  EXPECT_NE(s.get("/metrics").raw.find("dspark:requests_cancelled_total 1"), std::string::npos);
}

// 32 clients x 8 requests against 8 slots (the rest queue): every request completes and every
// greedy output equals the single-request output; /metrics reconciles with the responses.
TEST_F(ServerTest, LoadTestEveryRequestCompletesWithTheSingleRequestOutput) {
  SpecOptions o = base();
  o.verify = VerifyMode::Auto;  // batch-aware Algorithm 1 over a measured SPS(R, B)
  SpsProfile sps = measure_sps(*target, 8, 32, 1, 8);
  o.sps = &sps;
  o.calibration = nullptr;
  EngineOptions eo;
  eo.slots = 8;
  Running s(*target, *tokenizer, *dspark, o, eo);
  std::vector<std::string> prompts =
      io::read_prompts_jsonl(std::string(DSPARK_SOURCE_DIR) + "/bench/prompts/python-heldout.jsonl");
  prompts.resize(16);
  const int64_t max_tokens = 12;
  std::vector<std::string> expected;
  for (const auto& p : prompts) expected.push_back(reference(p, max_tokens));
  std::mutex mutex;
  int64_t ok = 0, draft_n = 0, accepted = 0, mismatches = 0;
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client = s.client();  // one keep-alive connection per client, as load generators do
      client.set_keep_alive(true);
      for (int i = 0; i < 8; ++i) {
        const size_t p = size_t(c * 8 + i) % prompts.size();
        const json body = {{"prompt", prompts[p]}, {"max_tokens", max_tokens}, {"temperature", 0}};
        Reply r = Running::reply(client.Post("/v1/completions", body.dump(), "application/json"));
        std::lock_guard lock(mutex);
        if (r.status != 200) {
          failures.push_back(fmt::format("client {} request {}: {} {}", c, i, r.status, r.raw.substr(0, 200)));
          continue;
        }
        ++ok;
        if (r.body["choices"][0]["text"] != expected[p]) ++mismatches;
        draft_n += r.body["timings"].value("draft_n", int64_t(0));
        accepted += r.body["timings"].value("draft_n_accepted", int64_t(0));
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok, 256) << fmt::format("{}", fmt::join(failures, "; "));
  EXPECT_EQ(mismatches, 0);
  const std::string metrics = s.get("/metrics").raw;
  EXPECT_NE(metrics.find("dspark:spec_decode_num_draft_tokens_total " + std::to_string(draft_n) + "\n"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("dspark:spec_decode_num_accepted_tokens_total " + std::to_string(accepted) + "\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("dspark:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"), std::string::npos);
  EXPECT_NE(metrics.find("dspark:requests_total 256\n"), std::string::npos);
  const EngineCounters c = s.engine.counters();
  EXPECT_GT(double(c.busy_slot_steps) / double(c.steps), 2.0);  // requests were batched
}

}  // namespace
}  // namespace dspark::serve
