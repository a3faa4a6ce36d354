#!/usr/bin/python3
"""PyTorch reference for `npm run bench` (CPU) and the GPU machine's bench (`--device cuda`, bench/device/run.sh).

Runs the same two workloads as the engine's benchmark, written in plain PyTorch from the formulas (no
transformers library, no scaled_dot_product_attention, no torch.compile), so that the TF.js figures can be
printed as ratios to these:

  train_step_ms         median wall time of one GRPO-like training step on a [batch, seq] token batch
  rollout_tokens_per_s  sampling throughput with a KV cache, log-prob and entropy per sampled token

Run with /usr/bin/python3 (Debian's python3-torch; see bench/install_torch.sh). With --json the last stdout
line is one JSON object; if torch cannot be imported that object is {"error": "torch not importable"}.
"""

import argparse
import re
import json
import math
import os
import statistics
import sys
import time

# The reference config of the issue: a Qwen2/Llama-style decoder small enough for a 2-core CPU.
CONFIG = {
    "n_layers": 2,
    "d_model": 128,
    "n_heads": 4,
    "n_kv_heads": 4,
    "head_dim": 32,
    "d_ff": 512,
    "vocab_size": 64,
    "seq_len": 64,
    "batch_size": 32,
    "optimizer": "adam",
    "lr": 1e-4,
    "grad_clip": 1.0,
    # Qwen2's rms_norm_eps; rope_theta is Llama's default (it does not change the cost).
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "init_std": 0.02,
    "rollout": {"num_sequences": 64, "prompt_len": 8, "max_new_tokens": 64, "temperature": 1.0},
}

# The small model of the bench (closer to the seeds' sizes than the reference): 4 layers, d_model 256, 8 heads, d_ff 1024, vocab 512, batch 16 x 128, Adam; rollout
# 32 sequences x 128 new tokens with the KV cache.
SMALL = dict(CONFIG, n_layers=4, d_model=256, n_heads=8, n_kv_heads=8, head_dim=32, d_ff=1024, vocab_size=512,
             seq_len=128, batch_size=16,
             rollout={"num_sequences": 32, "prompt_len": 8, "max_new_tokens": 128, "temperature": 1.0})


def train_step_flops(cfg):
    """Multiply-adds of one training step counted from the shapes, x2 for FLOPs, x3 for forward + backward (the
    backward pass costs two matmuls per forward matmul): the q/k/v/o projections, the MLP's three, the attention
    products QK^T and PV as executed (full T x T), and the tied LM head. Elementwise ops are left out."""
    d, f, v, t, b, L = cfg["d_model"], cfg["d_ff"], cfg["vocab_size"], cfg["seq_len"], cfg["batch_size"], cfg["n_layers"]
    kv = cfg["n_kv_heads"] * cfg["head_dim"]
    per_token = L * (2 * d * d + 2 * d * kv + 3 * d * f + 2 * t * d) + d * v
    return 3 * 2 * b * t * per_token


def default_threads():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch CPU reference figures for `npm run bench`.")
    p.add_argument("--json", action="store_true", help="end stdout with one JSON line of the figures")
    p.add_argument("--threads", type=int, default=default_threads(),
                   help="OpenBLAS threads, i.e. cores used by the matmuls (default: all usable cores)")
    p.add_argument("--iters", type=int, default=20, help="timed repetitions of each workload")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions before timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu",
                   help="where the model runs: cpu (Debian's torch on OpenBLAS), or cuda on a GPU machine (fp32, TF32 off)")
    p.add_argument("--check", action="store_true",
                   help="only verify that KV-cache sampling matches a full forward pass, then exit")
    p.add_argument("--compile", action="store_true",
                   help="the train step's forward through torch.compile (the bench's second PyTorch row; the rollout "
                        "stays eager: its KV cache grows every step)")
    p.add_argument("--serve", action="store_true",
                   help="answer timing requests, one JSON object per line on stdin and stdout (see serve()), "
                        "so that `npm run bench` can interleave these timings with its own")
    args = p.parse_args(argv)
    if args.threads < 1 or args.iters < 1 or args.warmup < 0:
        p.error("--threads and --iters must be >= 1, --warmup >= 0")
    return args


def main(argv):
    args = parse_args(argv)
    # Debian's torch does its matmuls in OpenBLAS (BLAS_INFO=generic -> libblas.so.3 -> openblas-pthread),
    # whose thread pool is separate from ATen's OpenMP pool; torch.set_num_threads reaches only the latter.
    # With both pools at 2 threads on this 2-core machine their spin-waiting threads starve each other: we
    # measured train steps from 90 ms to 2.2 s in one run. The matmuls are nearly all the work, so they get
    # the cores and ATen's elementwise ops run on the calling thread. Both are read at library load, so set
    # them before torch is imported.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        import torch  # noqa: F401
    except Exception:  # a half-installed torch raises OSError from its shared libraries, not ImportError
        if args.json:
            print(json.dumps({"error": "torch not importable"}))
            return 0
        print("torch is not importable by %s; run bench/install_torch.sh" % sys.executable, file=sys.stderr)
        return 1
    return run(args)


def sync(torch, device):
    """Waits for the device's queued work: a CUDA call returns before its kernels finish, so a timer must wait."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sgemm_gflops(torch, args):
    """The practical ceiling: a 1024 x 1024 x 1024 float32 product through the same BLAS (cuBLAS on cuda), median."""
    dev = torch.device(args.device)
    a, b = torch.randn(1024, 1024, device=dev), torch.randn(1024, 1024, device=dev)
    for _ in range(3):
        torch.mm(a, b)
    sync(torch, dev)
    times = []
    for _ in range(max(5, args.iters // 2)):
        t0 = time.perf_counter()
        torch.mm(a, b)
        sync(torch, dev)
        times.append(time.perf_counter() - t0)
    return 2 * 1024 ** 3 / statistics.median(times) / 1e9


def run(args):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if args.device != "cpu":
        if not torch.cuda.is_available():
            print(json.dumps({"error": "--device %s: torch.cuda.is_available() is False" % args.device}))
            return 0 if args.json or args.serve else 1
        # fp32 as the engine computes: no TF32 in matmuls or convolutions
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.check:
        return measure(torch, CONFIG, args, check_only=True)
    if args.serve:
        return serve(torch, args)
    ref = measure(torch, CONFIG, args)
    small = measure(torch, SMALL, args)
    ceiling = sgemm_gflops(torch, args)
    print("  sgemm 1024^3 through OpenBLAS: %.1f GFLOP/s (the practical ceiling)" % ceiling)
    if args.json:
        config = dict(CONFIG)
        config["aten_threads"] = 1
        config["iters"] = args.iters
        config["warmup"] = args.warmup
        print(json.dumps({
            "train_step_ms": ref["train_step_ms"],
            "rollout_tokens_per_s": ref["rollout_tokens_per_s"],
            "train_step_spread_ms": ref["train_step_spread_ms"],
            "train_step_gflops": ref["train_step_gflops"],
            "small": small,
            "sgemm_gflops": round(ceiling, 2),
            "torch_version": torch.__version__,
            "threads": args.threads,
            "config": config,
        }))
    return 0


def time_ms(fn, warmup, iters):
    """Wall times in ms of `iters` calls of fn after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
    return times


def serve(torch, args):
    """Timing requests from `npm run bench`, which alternates blocks of these with blocks of its own so that both
    sides see the same machine (a 2-core VM's speed drifts by 20-30 % over minutes). One JSON request per stdin line,
    one JSON answer per stdout line:
      {"op": "info"}                                 -> {"torch_version", "threads", "sgemm_gflops"}
      {"op": "train", "model": "reference"|"small", "n": k, "warmup": w}   -> {"ms": [k step times]}
      {"op": "rollout", "model": "reference"|"small", "n": k, "warmup": w} -> {"tokens_per_s": [k rates]}
    Each request runs w untimed repetitions before its k timed ones; the first request for a model builds it and
    runs `--warmup` more."""
    models = {"reference": CONFIG, "small": SMALL}
    built, warm = {}, set()
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "info":
                blas = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
                ans = {"torch_version": torch.__version__, "threads": args.threads, "sgemm_gflops": round(sgemm_gflops(torch, args), 2),
                       "blas": blas.group(1) if blas else "unknown",
                       "device": args.device, "device_name": torch.cuda.get_device_name() if args.device != "cpu" else "cpu"}
            elif op in ("train", "rollout") and req.get("model") in models:
                name = req["model"]
                if name not in built:
                    built[name] = build(torch, models[name], args.device, getattr(args, "compile", False))
                w, cfg = built[name], models[name]
                fn = w["train_step"] if op == "train" else w["rollout"]
                warmup = max(0, int(req.get("warmup", 0)))
                if (name, op) not in warm:
                    warmup += args.warmup
                    warm.add((name, op))
                times = time_ms(fn, warmup, max(1, int(req.get("n", 1))))
                if op == "train":
                    ans = {"ms": [round(x, 3) for x in times]}
                else:
                    ro = cfg["rollout"]
                    ans = {"tokens_per_s": [round(ro["num_sequences"] * ro["max_new_tokens"] / (x / 1000.0), 1) for x in times]}
            else:
                ans = {"error": "unknown request %s" % line.strip()[:200]}
        except Exception as e:  # a bad request gets an answer, not a dead server
            ans = {"error": "%s: %s" % (type(e).__name__, e)}
        out.write(json.dumps(ans) + "\n")
        out.flush()
    return 0


def build(torch, cfg, device="cpu", compile=False):
    """The model of cfg with Adam, as closures: train_step() (one GRPO-like step) and rollout(prompt=None). Both end in a
    read back to the host (loss.item(), .tolist()), so on cuda their wall time includes the device's work."""
    import torch.nn as nn

    dev = torch.device(device)

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            # Qwen2/Llama RMSNorm: x / sqrt(mean(x^2) + eps) * weight.
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    def rope_tables(max_len, head_dim, theta):
        # HF Llama/Qwen2 RoPE: frequencies theta^(-2i/d), each repeated on both halves (rotate-half layout).
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        freqs = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            d, h, hd = cfg["d_model"], cfg["n_heads"], cfg["head_dim"]
            self.n_heads, self.head_dim = h, hd
            # Qwen2 puts a bias on q/k/v but not on o_proj.
            self.q_proj = nn.Linear(d, h * hd, bias=True)
            self.k_proj = nn.Linear(d, h * hd, bias=True)
            self.v_proj = nn.Linear(d, h * hd, bias=True)
            self.o_proj = nn.Linear(h * hd, d, bias=False)

        def forward(self, x, cos, sin, mask, cache):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if cache is not None:
                # Append-per-step KV cache, as the engine's sampler keeps it.
                if cache[0] is not None:
                    k = torch.cat((cache[0], k), dim=2)
                    v = torch.cat((cache[1], v), dim=2)
                cache[0], cache[1] = k, v
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            if mask is not None:
                scores = scores + mask
            probs = torch.softmax(scores, dim=-1)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
            return self.o_proj(out)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            d, f = cfg["d_model"], cfg["d_ff"]
            self.gate_proj = nn.Linear(d, f, bias=False)
            self.up_proj = nn.Linear(d, f, bias=False)
            self.down_proj = nn.Linear(f, d, bias=False)

        def forward(self, x):
            return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(cfg["d_model"], cfg["rms_norm_eps"])
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(cfg["d_model"], cfg["rms_norm_eps"])
            self.mlp = MLP()

        def forward(self, x, cos, sin, mask, cache):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, cache)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Decoder(nn.Module):
        def __init__(self, max_len):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
            self.layers = nn.ModuleList([Block() for _ in range(cfg["n_layers"])])
            self.norm = RMSNorm(cfg["d_model"], cfg["rms_norm_eps"])
            cos, sin = rope_tables(max_len, cfg["head_dim"], cfg["rope_theta"])
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=cfg["init_std"])
                    if getattr(m, "bias", None) is not None:
                        nn.init.zeros_(m.bias)

        def forward(self, tokens, start=0, caches=None):
            t = tokens.shape[1]
            cos = self.cos[start:start + t]
            sin = self.sin[start:start + t]
            # A single decode step attends to every cached key, so only multi-token passes need the mask.
            mask = None
            if t > 1:
                mask = torch.full((t, t), float("-inf"), device=tokens.device).triu(1)
            x = self.embed_tokens(tokens)
            for i, layer in enumerate(self.layers):
                x = layer(x, cos, sin, mask, None if caches is None else caches[i])
            # Tied lm_head: logits against the embedding matrix.
            return torch.matmul(self.norm(x), self.embed_tokens.weight.t())

    ro = cfg["rollout"]
    max_len = max(cfg["seq_len"], ro["prompt_len"] + ro["max_new_tokens"])
    model = Decoder(max_len).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    n_params = sum(p.numel() for p in model.parameters())

    b, t, v = cfg["batch_size"], cfg["seq_len"], cfg["vocab_size"]
    tokens = torch.randint(0, v, (b, t), device=dev)
    # Fixed random per-sequence advantages stand in for group-normalised rewards.
    advantages = torch.randn(b, 1, device=dev)

    forward = torch.compile(model) if compile else model

    def train_step():
        logits = forward(tokens)
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        token_logp = logp.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
        loss = (-advantages * token_logp).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        optimizer.step()
        return loss.item()

    def rollout(prompt=None):
        n, p, new = ro["num_sequences"], ro["prompt_len"], ro["max_new_tokens"]
        if prompt is None:
            prompt = torch.randint(0, v, (n, p), device=dev)
        caches = [[None, None] for _ in range(cfg["n_layers"])]
        out_tokens, out_logp, out_ent = [], [], []
        with torch.inference_mode():
            logits = model(prompt, 0, caches)[:, -1]
            pos = p
            for step in range(new):
                logp = torch.log_softmax(logits / ro["temperature"], dim=-1)
                probs = logp.exp()
                nxt = torch.multinomial(probs, 1)
                out_tokens.append(nxt)
                out_logp.append(logp.gather(-1, nxt))
                out_ent.append(-(probs * logp).sum(-1, keepdim=True))
                if step + 1 < new:
                    logits = model(nxt, pos, caches)[:, -1]
                    pos += 1
        # The engine's sampler hands back plain number[][]; converting here keeps the comparison even.
        return (torch.cat(out_tokens, 1).tolist(), torch.cat(out_logp, 1).tolist(),
                torch.cat(out_ent, 1).tolist())

    return {"model": model, "train_step": train_step, "rollout": rollout, "n_params": n_params}


def measure(torch, cfg, args, check_only=False):
    w = build(torch, cfg, args.device)
    ro, b, t, v = cfg["rollout"], cfg["batch_size"], cfg["seq_len"], cfg["vocab_size"]
    train_step, rollout, n_params = w["train_step"], w["rollout"], w["n_params"]
    if check_only:
        return check(torch, w["model"], rollout, ro, v)

    train_times = time_ms(train_step, args.warmup, args.iters)
    rollout_times = time_ms(rollout, args.warmup, args.iters)
    train_ms = statistics.median(train_times)
    rollout_s = statistics.median(rollout_times) / 1000.0
    tokens_per_s = ro["num_sequences"] * ro["max_new_tokens"] / rollout_s

    def spread(xs):
        return "min %.2f  max %.2f" % (min(xs), max(xs))

    print("PyTorch %s CPU reference, %d thread(s), %d params" % (torch.__version__, args.threads, n_params))
    print("  model: %d layers, d_model %d, %d heads x %d, d_ff %d, vocab %d" % (
        cfg["n_layers"], cfg["d_model"], cfg["n_heads"], cfg["head_dim"], cfg["d_ff"], v))
    print("  train step  [%d x %d], Adam lr %g, clip %g: median %.2f ms  (%s ms, %d iters)" % (
        b, t, cfg["lr"], cfg["grad_clip"], train_ms, spread(train_times), args.iters))
    print("  rollout     %d seqs, prompt %d, %d new tokens: %.0f tokens/s  (median %.1f ms; %s ms)" % (
        ro["num_sequences"], ro["prompt_len"], ro["max_new_tokens"], tokens_per_s, rollout_s * 1000.0,
        spread(rollout_times)))
    gflops = train_step_flops(cfg) / (train_ms / 1000.0) / 1e9
    print("  train step  %.2f GFLOP/s (%.3g FLOPs counted from the shapes)" % (gflops, train_step_flops(cfg)))
    return {
        "train_step_ms": round(train_ms, 3),
        "train_step_spread_ms": [round(min(train_times), 3), round(max(train_times), 3)],
        "rollout_tokens_per_s": round(tokens_per_s, 1),
        "train_step_gflops": round(gflops, 2),
    }


def check(torch, model, rollout, ro, vocab):
    """Samples with the KV cache, then rescores the whole sequence in one causal forward pass: the
    log-probs and entropies must agree, else the cache, the RoPE offsets or the mask are wrong."""
    n, p, new = ro["num_sequences"], ro["prompt_len"], ro["max_new_tokens"]
    prompt = torch.randint(0, vocab, (n, p))
    tokens, logps, ents = rollout(prompt)
    tokens, logps, ents = torch.tensor(tokens), torch.tensor(logps), torch.tensor(ents)
    with torch.inference_mode():
        logits = model(torch.cat((prompt, tokens), 1))[:, p - 1:-1]
        full = torch.log_softmax(logits / ro["temperature"], dim=-1)
        want_logp = full.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        want_ent = -(full.exp() * full).sum(-1)
    d_logp = (logps - want_logp).abs().max().item()
    d_ent = (ents - want_ent).abs().max().item()
    ok = d_logp < 1e-4 and d_ent < 1e-4
    print("check %s: max |dlogprob| %.2e, max |dentropy| %.2e over %d x %d sampled tokens" % (
        "ok" if ok else "FAILED", d_logp, d_ent, n, new))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
