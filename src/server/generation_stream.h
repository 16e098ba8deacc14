// One request's path from the engine to its HTTP thread.
//
// RequestChannel: the engine's callbacks (on its step thread, which must never wait for a client)
// queue events here; the HTTP thread that serves the request waits on it. The channel is shared by
// both sides (std::shared_ptr), so it outlives whichever side finishes first.
//
// TextAssembler: turns the HTTP thread's share of tokens into text that is safe to send: UTF-8 is
// never split (StreamingDecoder), text that may begin a stop string is held back (StopMatcher), and
// each token's logprob entry is built from its raw bytes.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/service.h"
#include "server/openai_response.h"
#include "server/stop_matcher.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace polykv::server {

class RequestChannel {
 public:
  // Engine side (quick, never blocks on the client). on_token returns false once cancel() was called.
  bool on_token(const TokenEvent& ev);
  void on_done(const FinishInfo& fi);

  // HTTP side: waits up to `timeout` for news; appends queued tokens to `tokens` and returns true with
  // `done` set once the request has finished and every token was taken.
  bool wait(std::vector<TokenEvent>& tokens, std::optional<FinishInfo>& done, std::chrono::milliseconds timeout);
  void cancel();  // the engine's next on_token returns false

  // Hooks a request's callbacks to a channel (they hold it: it lives until on_done has run).
  static void attach(const std::shared_ptr<RequestChannel>& ch, GenerationRequest& req);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<TokenEvent> tokens_;
  std::optional<FinishInfo> done_;
  bool cancelled_ = false;
};

class TextAssembler {
 public:
  TextAssembler(const Tokenizer& tok, std::vector<std::string> stop, bool logprobs);

  struct Delta {
    std::string text;
    std::vector<LogprobEntry> logprobs;  // of the tokens pushed (empty unless logprobs were asked)
  };
  // Adds generated tokens. After a stop string matched, further tokens add nothing.
  Delta push(const std::vector<TokenEvent>& tokens);
  Delta finish();  // what is still held back, at the end of generation
  bool stop_matched() const { return stop_.matched(); }

 private:
  const Tokenizer& tok_;
  StreamingDecoder decoder_;
  StopMatcher stop_;
  bool logprobs_;
  size_t decoded_bytes_ = 0;  // text the decoder produced so far (the completions text_offset)
};

}  // namespace polykv::server
