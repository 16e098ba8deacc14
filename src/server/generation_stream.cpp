#include "server/generation_stream.h"

namespace polykv::server {

bool RequestChannel::on_token(const TokenEvent& ev) {
  {
    std::lock_guard lk(mu_);
    if (cancelled_) return false;
    tokens_.push_back(ev);
  }
  cv_.notify_all();
  return true;
}

void RequestChannel::on_done(const FinishInfo& fi) {
  {
    std::lock_guard lk(mu_);
    done_ = fi;
  }
  cv_.notify_all();
}

bool RequestChannel::wait(std::vector<TokenEvent>& tokens, std::optional<FinishInfo>& done,
                          std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !tokens_.empty() || done_.has_value(); });
  for (auto& t : tokens_) tokens.push_back(std::move(t));
  tokens_.clear();
  if (done_) done = done_;
  return done.has_value();
}

void RequestChannel::cancel() {
  std::lock_guard lk(mu_);
  cancelled_ = true;
}

void RequestChannel::attach(const std::shared_ptr<RequestChannel>& ch, GenerationRequest& req) {
  req.on_token = [ch](const TokenEvent& ev) { return ch->on_token(ev); };
  req.on_done = [ch](const FinishInfo& fi) { ch->on_done(fi); };
}

TextAssembler::TextAssembler(const Tokenizer& tok, std::vector<std::string> stop, bool logprobs)
    : tok_(tok), decoder_(tok), stop_(std::move(stop)), logprobs_(logprobs) {}

TextAssembler::Delta TextAssembler::push(const std::vector<TokenEvent>& tokens) {
  Delta d;
  for (const TokenEvent& ev : tokens) {
    if (stop_.matched()) break;
    if (logprobs_) {
      LogprobEntry e;
      e.token = tok_.token_to_piece(ev.id);
      e.logprob = ev.logprob;
      e.text_offset = decoded_bytes_;
      for (const TokenLogprob& t : ev.top) e.top.emplace_back(tok_.token_to_piece(t.id), t.logprob);
      d.logprobs.push_back(std::move(e));
    }
    const std::string piece = decoder_.push(ev.id);
    decoded_bytes_ += piece.size();
    d.text += stop_.push(piece);
  }
  return d;
}

TextAssembler::Delta TextAssembler::finish() {
  Delta d;
  if (!stop_.matched()) d.text = stop_.push(decoder_.flush());
  d.text += stop_.flush();
  return d;
}

}  // namespace polykv::server
