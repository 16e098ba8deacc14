#!/usr/bin/env python3
"""Trains the models polykv drafts with for the embedded model (issue #10, deliverable 4):
  (a) a small llama draft model with the embedded model's tokenizer, distilled from the target;
  (b) an MTP (nextn) head for the embedded model: the target frozen, its final normed hidden states
      as input, trained to predict token t+2 (distilled from the target's own next-token distribution).
Writes (to --out) polykv-draft.gguf (f16) and polykv-code-26m-mtp.gguf (the embedded model's tensors
byte for byte + blk.N.nextn.* + the MTP block blk.N.*, block_count N+1, llama.nextn_predict_layers 1),
train_draft.json (losses, held-out metrics, timings) and prints a log. The target is read from the
embedded q8_0 GGUF (dequantized in numpy), so the head is trained against the exact weights polykv runs.
Data: site-packages *.py, the embedded model's held-out split (tools/draft/corpus.py).
Held-out metrics (teacher-forced on held-out files): top-1 agreement of the draft's token with the
target's (draft model: row t; MTP: MTP row t vs target row t+1), the acceptance rate of a greedy drafter."""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "draft"))
import corpus  # noqa: E402
import gguf_io as G  # noqa: E402
import nets  # noqa: E402

T0 = time.time()
LOG = []


def log(*a):
    s = f"[{time.time() - T0:6.1f}s] " + " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)


def target_cfg(r):
    m = lambda k: r.meta("llama." + k)  # noqa: E731
    return nets.Cfg(n_embd=m("embedding_length"), n_ff=m("feed_forward_length"), n_head=m("attention.head_count"),
                    n_head_kv=m("attention.head_count_kv"), head_dim=m("attention.key_length"),
                    n_layer=m("block_count"), n_vocab=len(r.meta("tokenizer.ggml.tokens")),
                    rope_base=float(m("rope.freq_base")), eps=float(m("attention.layer_norm_rms_epsilon")),
                    n_ctx=m("context_length"))


def lr_at(p, peak, warm=0.05, floor=0.1):
    if p < warm:
        return peak * max(p / warm, 0.01)
    q = (p - warm) / (1 - warm)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(q, 1.0))))


class Trainer:
    """Time-budgeted AdamW loop; loss_fn(x) -> scalar loss of a batch x [B][T+?]."""

    def __init__(self, a, dev, stream):
        self.a, self.dev, self.stream = a, dev, stream
        self.gen = torch.Generator(device="cpu")
        self.gen.manual_seed(1)

    def batch(self, T):
        N = self.stream.numel()
        st = torch.randint(0, N - T - 1, (self.a.batch,), generator=self.gen)
        return self.stream[st[:, None] + torch.arange(T)[None, :]].long().to(self.dev, non_blocking=True)

    def run(self, name, params, loss_fn, seconds, peak_lr, T):
        opt = torch.optim.AdamW([dict(params=[p for p in params if p.ndim >= 2], weight_decay=0.1),
                                 dict(params=[p for p in params if p.ndim < 2], weight_decay=0.0)],
                                lr=peak_lr, betas=(0.9, 0.95), eps=1e-8)
        t0, step, curve = time.time(), 0, []
        while True:
            p = (time.time() - t0) / seconds
            if p >= 1.0 or step >= self.a.max_steps > 0:
                break
            for g in opt.param_groups:
                g["lr"] = lr_at(p, peak_lr)
            loss = loss_fn(self.batch(T))
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 100 == 0 or step == 10:
                el = time.time() - t0
                curve.append(dict(step=step, t=round(el, 1), loss=round(float(loss.detach()), 4),
                                  grad_norm=round(float(gn), 3), lr=round(g["lr"], 7)))
                log(f"{name} step {step} t={el:.0f}s loss={float(loss.detach()):.4f} gnorm={float(gn):.2f} "
                    f"tok/s={step * x_tokens(self.a, T) / el / 1e3:.0f}k")
        return dict(steps=step, seconds=round(time.time() - t0, 1), tokens=step * x_tokens(self.a, T),
                    peak_lr=peak_lr, curve=curve)


def x_tokens(a, T):
    return a.batch * T


def autocast(dev):
    if dev.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def soft_ce(logits, target_logits):
    V = logits.shape[-1]
    return F.cross_entropy(logits.float().reshape(-1, V), target_logits.float().softmax(-1).reshape(-1, V))


@torch.no_grad()
def evaluate(target, draft, mtp, windows, dev, bs=8):
    """Teacher-forced on held-out windows [n][T]: agreement of top-1 tokens with the target's."""
    s = dict(rows=0, target_acc=0.0, draft_agree=0.0, draft_acc=0.0, draft_ce=0.0, mtp_rows=0, mtp_agree=0.0,
             mtp_acc=0.0, mtp_ce=0.0, mtp2_rows=0, mtp2_agree=0.0)
    for i in range(0, windows.shape[0], bs):
        x = windows[i:i + bs].to(dev)
        with autocast(dev):
            h, lt = target(x)
            top = lt.argmax(-1)  # [B][T] the target's greedy token after each row
            s["rows"] += top[:, :-1].numel()
            s["target_acc"] += float((top[:, :-1] == x[:, 1:]).sum())
            if draft is not None:
                _, ld = draft(x)
                s["draft_agree"] += float((ld.argmax(-1)[:, :-1] == top[:, :-1]).sum())
                s["draft_acc"] += float((ld.argmax(-1)[:, :-1] == x[:, 1:]).sum())
                s["draft_ce"] += float(soft_ce(ld[:, :-1], lt[:, :-1])) * top[:, :-1].numel()
            if mtp is not None:
                lm, y = mtp(x[:, 1:], h[:, :-1], target.token_embd, target.output)  # row t predicts id_{t+2}
                n = lm[:, :-1].shape[0] * lm[:, :-1].shape[1]
                # chained (draft 2): the head's own y_t as the hidden state, token t+2, predicts id_{t+3}
                l2, _ = mtp(x[:, 2:], y[:, :-1], target.token_embd, target.output)
                s["mtp2_rows"] += l2[:, :-1].numel() // l2.shape[-1]
                s["mtp2_agree"] += float((l2.argmax(-1)[:, :-1] == top[:, 2:-1]).sum())
                s["mtp_rows"] += n
                s["mtp_agree"] += float((lm.argmax(-1)[:, :-1] == top[:, 1:-1]).sum())
                s["mtp_acc"] += float((lm.argmax(-1)[:, :-1] == x[:, 2:]).sum())
                s["mtp_ce"] += float(soft_ce(lm[:, :-1], lt[:, 1:-1])) * n
    out = dict(rows=s["rows"], target_top1_acc=round(s["target_acc"] / s["rows"], 4))
    if draft is not None:
        out.update(draft_top1_agreement=round(s["draft_agree"] / s["rows"], 4),
                   draft_top1_acc=round(s["draft_acc"] / s["rows"], 4),
                   draft_soft_ce=round(s["draft_ce"] / s["rows"], 4))
    if mtp is not None:
        out.update(mtp_rows=s["mtp_rows"], mtp_top1_agreement=round(s["mtp_agree"] / s["mtp_rows"], 4),
                   mtp_top1_acc_tok_t2=round(s["mtp_acc"] / s["mtp_rows"], 4),
                   mtp_soft_ce=round(s["mtp_ce"] / s["mtp_rows"], 4),
                   mtp_chained_top1_agreement=round(s["mtp2_agree"] / max(1, s["mtp2_rows"]), 4))
    return out


def write_gguf(path, base, kv_updates, tensors, raw_from=None):
    """base: Reader whose metadata is copied (then kv_updates applied); tensors: [(name, array)] written
    as F16 (2-D) / F32 (1-D); raw_from: Reader whose tensors are copied byte for byte first."""
    w = G.Writer()
    w.kv = list(base.kv)
    for k, t, v in kv_updates:
        w.set(k, t, v)
    if raw_from is not None:
        for t in raw_from.tensors:
            w.add_raw(t["name"], t["ne"], t["type"], raw_from.raw(t["name"]))
    for n, a in tensors:
        w.add_array(n, a, G.GGML_F16 if a.ndim == 2 else G.GGML_F32)
    w.write(path)
    log(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB, {len(w.tensors)} tensors)")


def fit(seconds, end):
    """The training budget: `seconds`, shortened so that training ends by `end` s after start (>= 10 s)."""
    left = end - (time.time() - T0)
    if left < seconds:
        log(f"budget shortened from {seconds:.0f}s to {max(10.0, left):.0f}s to meet the deadline")
    return max(10.0, min(seconds, left))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--target", default=os.path.join(here, "..", "models", "polykv-code-26m-q8_0.gguf"))
    ap.add_argument("--tok", default=os.path.join(here, "data", "hf_tokenizer.model"))
    ap.add_argument("--roots", default="", help="os.pathsep-separated dirs (default: this Python's site-packages)")
    ap.add_argument("--max-files", type=int, default=0, help="read at most this many files (0: all)")
    ap.add_argument("--max-train-mb", type=float, default=400, help="train on at most this many MB of text")
    ap.add_argument("--seq", type=int, default=2048, help="training window (the target's context length)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--draft-seconds", type=float, default=150)
    ap.add_argument("--mtp-seconds", type=float, default=150)
    ap.add_argument("--max-steps", type=int, default=0, help="stop each training after this many steps (0: time only)")
    ap.add_argument("--draft-layers", type=int, default=2)
    ap.add_argument("--draft-embd", type=int, default=256)
    ap.add_argument("--draft-ff", type=int, default=768)
    ap.add_argument("--draft-lr", type=float, default=2e-3)
    ap.add_argument("--mtp-lr", type=float, default=1e-3)
    ap.add_argument("--chain-weight", type=float, default=0.5, help="weight of the chained (draft 2) MTP loss")
    ap.add_argument("--deadline", type=float, default=420,
                    help="seconds from start by which everything is written (training budgets shrink to fit)")
    ap.add_argument("--eval-windows", type=int, default=32)
    ap.add_argument("--only", choices=["both", "draft", "mtp"], default="both")
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    R = dict(args=vars(a), versions=dict(torch=torch.__version__, numpy=np.__version__, python=sys.version.split()[0]))
    res_path = os.path.join(a.out, "train_draft.json")

    def save():
        R["log"] = LOG
        with open(res_path, "w") as f:
            json.dump(R, f, indent=1)

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        R["versions"]["gpu"] = torch.cuda.get_device_name(0)
    torch.set_num_threads(max(1, min(a.threads, os.cpu_count() or 1)))
    log("device", dev, "torch", torch.__version__)

    # ---- the target (frozen), exactly the embedded model's weights
    tr = G.Reader(a.target)
    tc = target_cfg(tr)
    assert tr.meta("general.architecture") == "llama" and tr.meta("llama.nextn_predict_layers", 0) == 0
    target = nets.Llama(tc)
    target.load_gguf(tr)
    target = target.to(dev).eval().requires_grad_(False)
    log("target", a.target, vars(tc))

    # ---- data
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=a.tok)
    assert sp.get_piece_size() == tc.n_vocab, (sp.get_piece_size(), tc.n_vocab)
    assert [sp.id_to_piece(i) for i in range(50)] == list(tr.meta("tokenizer.ggml.tokens")[:50]), "tokenizer mismatch"
    t0 = time.time()
    roots = a.roots.split(os.pathsep) if a.roots else corpus.default_roots()
    texts = corpus.read_files(roots, max_files=a.max_files)
    train_h, held_h = corpus.split(texts)
    cap, tot, sel = a.max_train_mb * 1e6, 0, []
    for h in train_h:  # sha256 order: an unbiased subset
        if tot >= cap:
            break
        sel.append(h)
        tot += len(texts[h])
    tr_stream = corpus.encode(sp, [texts[h] for h in sel], a.threads)
    ho_stream = corpus.encode(sp, [texts[h] for h in held_h], a.threads)
    del texts
    R["data"] = dict(roots=roots, train_files_total=len(train_h), train_files_used=len(sel), train_chars=tot,
                     train_tokens=int(tr_stream.size), heldout_files=len(held_h), heldout_tokens=int(ho_stream.size),
                     seconds=round(time.time() - t0, 1))
    log("data", R["data"])
    n_ev = min(a.eval_windows, ho_stream.size // a.seq)
    assert n_ev >= 1 and tr_stream.size > 4 * a.seq, "not enough text"
    windows = torch.from_numpy(ho_stream[:n_ev * a.seq].astype(np.int64).reshape(n_ev, a.seq))
    stream = torch.from_numpy(tr_stream.astype(np.int32))
    if dev.type == "cuda":
        stream = stream.pin_memory()
    trainer = Trainer(a, dev, stream)
    R["eval_before"] = evaluate(target, None, None, windows, dev)
    log("held-out target", R["eval_before"])
    save()

    # ---- (a) draft model, distilled from the target
    if a.only in ("both", "draft"):
        dc = nets.Cfg(n_embd=a.draft_embd, n_ff=a.draft_ff, n_head=4, n_head_kv=2, head_dim=a.draft_embd // 4,
                      n_layer=a.draft_layers, n_vocab=tc.n_vocab, rope_base=tc.rope_base, eps=tc.eps, n_ctx=tc.n_ctx)
        torch.manual_seed(0)
        draft = nets.Llama(dc).to(dev)

        def draft_loss(x):
            with torch.no_grad(), autocast(dev):
                _, lt = target(x)
            with autocast(dev):
                _, ld = draft(x)
            return soft_ce(ld, lt)

        secs = fit(a.draft_seconds, a.deadline - (a.mtp_seconds + 40 if a.only == "both" else 30))
        R["draft_train"] = trainer.run("draft", list(draft.parameters()), draft_loss, secs, a.draft_lr, a.seq)
        draft.eval()
        R["draft_eval"] = evaluate(target, draft, None, windows, dev)
        log("held-out draft", R["draft_eval"])
        R["draft_model"] = dict(vars(dc), n_params=sum(p.numel() for p in draft.parameters()))
        L = G.U32
        write_gguf(os.path.join(a.out, "polykv-draft.gguf"), tr,
                   [("general.name", G.STR, "polykv-code-draft"), ("general.size_label", G.STR,
                     f"{R['draft_model']['n_params'] / 1e6:.0f}M"), ("general.file_type", L, 1),
                    ("llama.block_count", L, dc.n_layer), ("llama.embedding_length", L, dc.n_embd),
                    ("llama.feed_forward_length", L, dc.n_ff), ("llama.attention.head_count", L, dc.n_head),
                    ("llama.attention.head_count_kv", L, dc.n_head_kv), ("llama.attention.key_length", L, dc.head_dim),
                    ("llama.attention.value_length", L, dc.head_dim), ("llama.rope.dimension_count", L, dc.head_dim)],
                   draft.gguf_tensors())
        del draft
        save()

    # ---- (b) MTP head on the frozen target
    if a.only in ("both", "mtp"):
        torch.manual_seed(0)
        mtp = nets.MtpHead(tc)
        nets.load_block(mtp.block, tr, f"blk.{tc.n_layer - 1}.")  # warm start: the target's last layer
        with torch.no_grad():
            mtp.shared_head_norm.copy_(torch.from_numpy(tr.array("output_norm.weight")))
        mtp = mtp.to(dev)

        def mtp_loss(x):
            with torch.no_grad(), autocast(dev):
                h, lt = target(x)
            with autocast(dev):
                lm, y = mtp(x[:, 1:], h[:, :-1], target.token_embd, target.output)
                loss = soft_ce(lm, lt[:, 1:])  # MTP row t vs the target's distribution of token t+2
                if a.chain_weight > 0:  # draft 2 of a chain: y_t as the hidden state, token t+2
                    l2, _ = mtp(x[:, 2:], y[:, :-1], target.token_embd, target.output)
                    loss = loss + a.chain_weight * soft_ce(l2, lt[:, 2:])
            return loss

        secs = fit(a.mtp_seconds, a.deadline - 30)
        R["mtp_train"] = trainer.run("mtp", list(mtp.parameters()), mtp_loss, secs, a.mtp_lr, a.seq)
        mtp.eval()
        R["mtp_eval"] = evaluate(target, None, mtp, windows, dev)
        log("held-out mtp", R["mtp_eval"])
        write_gguf(os.path.join(a.out, "polykv-code-26m-mtp.gguf"), tr,
                   [("general.name", G.STR, tr.meta("general.name") + "_MTP"),
                    ("llama.block_count", G.U32, tc.n_layer + 1), ("llama.nextn_predict_layers", G.U32, 1)],
                   mtp.gguf_tensors(tc.n_layer), raw_from=tr)
        save()
    R["total_seconds"] = round(time.time() - T0, 1)
    log("done in", R["total_seconds"], "s")
    save()


if __name__ == "__main__":
    main()
