// Named pools: POST /v1/pools prefills a prompt or a conversation once and pins it; GET /v1/pools,
// GET /v1/pools/{name}, DELETE /v1/pools/{name}. The server remembers how each pool was made
// (PoolSource) so that chat requests on it can check that they continue its messages.
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace polykv::server {

namespace {

const char* const kPoolPath = R"(/v1/pools/([^/]+))";

std::vector<int32_t> pool_tokens(ServerState& st, const PoolRequest& r) {
  if (r.from_messages)
    return st.chat.tokenize(r.messages, Json(nullptr), Json::object(), /*add_generation_prompt=*/false);
  if (r.prompt.prompt_is_ids) return checked_ids(st.tok, r.prompt.prompt_ids, "prompt");
  return st.tok.encode(r.prompt.prompt, /*add_special=*/true, /*parse_special=*/true);
}

void create_pool(ServerState& st, const std::string& body, httplib::Response& res) {
  const PoolRequest r = parse_pool_request(parse_request_json(body));
  PoolSource src;
  src.from_messages = r.from_messages;
  src.messages = r.messages;
  src.tokens = pool_tokens(st, r);
  const int n_ctx = st.service.model_info().n_ctx;
  if (src.tokens.empty()) bad_request("the pool's prompt is empty", "prompt");
  if (int64_t(src.tokens.size()) >= n_ctx)
    throw ApiError(413,
                   "the pool is " + std::to_string(src.tokens.size()) + " tokens, over the context limit of " +
                       std::to_string(n_ctx) + " tokens",
                   "context_length_exceeded", r.from_messages ? "messages" : "prompt");
  if (st.service.get_pool(r.name))
    throw ApiError(409, "a pool named '" + r.name + "' already exists", "pool_exists", "name");
  const std::string k = r.k_type.empty() ? st.opts.pool_k_type : r.k_type;
  const std::string v = r.v_type.empty() ? st.opts.pool_v_type : r.v_type;
  std::fprintf(stderr, "pool '%s': prefilling %zu tokens\n", r.name.c_str(), src.tokens.size());
  const auto t0 = std::chrono::steady_clock::now();
  PoolInfo info;
  try {
    info = st.service.create_pool(r.name, src.tokens, k, v);
  } catch (const Error& e) {
    if (st.service.get_pool(r.name)) throw ApiError(409, e.what(), "pool_exists", "name");  // lost a race
    throw;
  }
  std::fprintf(stderr, "pool '%s': %d tokens, %zu KV bytes, ready in %.2f s\n", r.name.c_str(), info.n_tokens,
               info.kv_bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  {
    std::lock_guard lk(st.pools_mu);
    st.pool_sources[r.name] = std::move(src);
  }
  send_json(res, 200, pool_json(info));
}

}  // namespace

void register_pool_routes(httplib::Server& http, ServerState& st) {
  http.Post("/v1/pools",
            [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
              guarded(st, req, res, [&] { create_pool(st, read_body(st, res, reader), res); });
            });
  http.Get("/v1/pools", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(st, req, res, [&] {
      Json data = Json::array();
      for (const PoolInfo& p : st.service.list_pools()) data.push_back(pool_json(p));
      send_json(res, 200, {{"object", "list"}, {"data", std::move(data)}});
    });
  });
  http.Get(kPoolPath, [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(st, req, res, [&] {
      const std::string name = req.matches[1];
      const auto info = st.service.get_pool(name);
      if (!info) throw ApiError(404, "unknown pool '" + name + "'", "pool_not_found");
      send_json(res, 200, pool_json(*info));
    });
  });
  // With a content reader, a DELETE that announces no body (curl -X DELETE sends no Content-Length)
  // does not wait for one; a body that is announced is read (and ignored).
  http.Delete(kPoolPath,
              [&st](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
                if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
                  try {
                    read_body(st, res, reader);
                  } catch (const ApiError& e) {
                    send_error(res, e);
                    return;
                  }
                }
                guarded(st, req, res, [&] {
                  const std::string name = req.matches[1];
                  if (!st.service.delete_pool(name))
                    throw ApiError(404, "unknown pool '" + name + "'", "pool_not_found");
                  {
                    std::lock_guard lk(st.pools_mu);
                    st.pool_sources.erase(name);
                  }
                  std::fprintf(stderr, "pool '%s': deleted\n", name.c_str());
                  send_json(res, 200, {{"name", name}, {"object", "pool"}, {"deleted", true}});
                });
              });
}

}  // namespace polykv::server
