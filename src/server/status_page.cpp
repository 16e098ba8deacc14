// GET /: the status page, one self-contained HTML document (no external assets). Its script polls
// GET /v1/status every second and shows pools, agents, requests, KV memory and sharing. With
// --api-key, /v1/status needs the key: the page asks for it once and keeps it in localStorage.
#include "server/status_page.h"

namespace polykv::server {

const char* status_page_html() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>polykv</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
  h1 { font-size: 1.3em; margin: 0 0 .2em; }
  .sub { color: #666; margin-bottom: 1em; }
  .cards { display: flex; flex-wrap: wrap; gap: .8em; margin-bottom: 1.2em; }
  .card { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: .6em .9em; min-width: 11em; }
  .card .v { font-size: 1.4em; font-weight: 600; }
  .card .k { color: #666; font-size: .85em; }
  .bar { height: 8px; background: #eee; border-radius: 4px; overflow: hidden; margin-top: .3em; }
  .bar > div { height: 100%; background: #4a7; }
  table { border-collapse: collapse; background: #fff; min-width: 40em; }
  th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: right; }
  th:first-child, td:first-child { text-align: left; }
  #state.ok { color: #2a6; } #state.err { color: #c33; }
  #key { display: none; margin: 1em 0; }
</style>
</head>
<body>
<h1>polykv <span id="model">…</span></h1>
<div class="sub"><span id="state">connecting…</span> · <span id="updated"></span></div>
<div id="key">API key: <input id="keyinput" type="password" size="30"> <button id="keybtn">use</button></div>
<div class="cards">
  <div class="card"><div class="k">requests running / waiting</div><div class="v" id="running">–</div></div>
  <div class="card"><div class="k">requests total (failed)</div><div class="v" id="total">–</div></div>
  <div class="card"><div class="k">KV blocks used / total</div><div class="v" id="blocks">–</div>
    <div class="bar"><div id="blockbar" style="width:0%"></div></div></div>
  <div class="card"><div class="k">KV shared blocks · idle cached</div><div class="v" id="shared">–</div></div>
  <div class="card"><div class="k">KV memory in use · in pools</div><div class="v" id="kvbytes">–</div></div>
  <div class="card"><div class="k">prefix hit rate</div><div class="v" id="hitrate">–</div></div>
  <div class="card"><div class="k">tokens prompt · generated</div><div class="v" id="tokens">–</div></div>
  <div class="card"><div class="k">last step</div><div class="v" id="step">–</div></div>
</div>
<h2 style="font-size:1.1em">Pools</h2>
<table>
  <thead><tr><th>name</th><th>tokens</th><th>KV bytes</th><th>K / V</th><th>agents</th><th>hits</th></tr></thead>
  <tbody id="pools"><tr><td colspan="6">none</td></tr></tbody>
</table>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function cell(row, text) { const td = document.createElement("td"); td.textContent = text; row.appendChild(td); }
function show(s) {
  const m = s.model;
  $("model").textContent = m.id + " (ctx " + m.n_ctx + ", KV " + m.cache_type_k + " / " + m.cache_type_v + ")";
  $("running").textContent = s.requests.running + " / " + s.requests.waiting;
  $("total").textContent = s.requests.total + " (" + s.requests.failed + ")";
  $("blocks").textContent = s.kv.blocks_used + " / " + s.kv.blocks_total;
  $("blockbar").style.width = (s.kv.blocks_total ? 100 * s.kv.blocks_used / s.kv.blocks_total : 0) + "%";
  $("shared").textContent = s.kv.blocks_shared + " · " + s.kv.blocks_cached_idle;
  $("kvbytes").textContent = bytes(s.kv.bytes_used) + " · " + bytes(s.kv.pool_bytes);
  $("hitrate").textContent = (100 * s.tokens.prefix_hit_rate).toFixed(1) + "%";
  $("tokens").textContent = s.tokens.prompt + " · " + s.tokens.generated;
  $("step").textContent = (1000 * s.steps.last_seconds).toFixed(1) + " ms";
  const body = $("pools"); body.replaceChildren();
  if (!s.pools.length) { const r = body.insertRow(); cell(r, "none"); r.cells[0].colSpan = 6; }
  for (const p of s.pools) {
    const r = document.createElement("tr");
    cell(r, p.name); cell(r, p.tokens); cell(r, bytes(p.kv_bytes)); cell(r, p.cache_type_k + " / " + p.cache_type_v);
    cell(r, p.agents); cell(r, p.hits);
    body.appendChild(r);
  }
  $("state").textContent = "live"; $("state").className = "ok";
  $("updated").textContent = "updated " + new Date().toLocaleTimeString();
}
async function poll() {
  try {
    const key = localStorage.getItem("polykv-key");
    const r = await fetch("/v1/status", { headers: key ? { Authorization: "Bearer " + key } : {} });
    if (r.status === 401) { $("key").style.display = "block"; throw new Error("API key needed"); }
    if (!r.ok) throw new Error("HTTP " + r.status);
    show(await r.json());
  } catch (e) {
    $("state").textContent = "offline: " + e.message; $("state").className = "err";
  }
  setTimeout(poll, 1000);
}
$("keybtn").onclick = () => {
  localStorage.setItem("polykv-key", $("keyinput").value);
  $("key").style.display = "none";
};
poll();
</script>
</body>
</html>
)HTML";
}

}  // namespace polykv::server
