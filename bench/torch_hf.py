#!/usr/bin/python3
"""PyTorch CPU reference for a Hugging Face folder of the Qwen2 / Llama family (config.json + model.safetensors), for
`npm run bench`'s model-size rows and the 0.5B tests: teacher-forced scoring and greedy or sampled decoding with a KV
cache, written in plain PyTorch from the formulas (no transformers library, which this machine does not have; the
safetensors file is parsed here: an 8-byte header length, a JSON header, raw little-endian data).

The model runs in float32, as the engine does (BF16 weights are exact in float32). Grouped-query attention repeats
each kv head for its n_heads / n_kv_heads query heads (HF repeat_kv order).

One JSON request per stdin line, one JSON answer per stdout line:
  {"op": "load", "dir": path, "threads": n}               -> {"params", "seconds"}
  {"op": "score", "prompt": [ids], "completions": [[ids]], "n": k}
      -> {"logp": [[..]], "entropy": [[..]], "tokens_per_s": [k rates]}   (full vocabulary log-softmax, in row chunks)
  {"op": "decode", "prompts": [[ids]], "new": m, "greedy": bool, "n": k}
      -> {"ids": [[..]], "logp": [[..]], "tokens_per_s": [k rates]}
Run with /usr/bin/python3 (Debian's python3-torch). TORCH_HF_DEVICE=cuda runs it on the GPU machine (fp32, TF32 off);
every answer ends in a read back to the host (.tolist()), so its time includes the device's work.
"""

import json
import math
import os
import sys
import time


def read_safetensors(torch, path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = t.to(torch.float32)
    return out


class Model:
    def __init__(self, torch, folder, device="cpu"):
        self.torch = torch
        self.dev = torch.device(device)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        self.cfg = cfg
        path = os.path.join(folder, "model.safetensors")
        self.w = {k: v.to(self.dev) for k, v in read_safetensors(torch, path).items()}
        self.L = cfg["num_hidden_layers"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads", self.H)
        self.d = cfg["hidden_size"]
        self.hd = cfg.get("head_dim", self.d // self.H)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.lm = self.w["lm_head.weight"] if "lm_head.weight" in self.w else self.w["model.embed_tokens.weight"]
        self.params = sum(t.numel() for t in self.w.values())

    def rope(self, start, t):
        torch = self.torch
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        f = torch.outer(torch.arange(start, start + t, dtype=torch.float64), inv)
        emb = torch.cat((f, f), -1)
        return emb.cos().float().to(self.dev), emb.sin().float().to(self.dev)

    def norm(self, x, w):
        return x * self.torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def hidden(self, ids, mask_add, start, caches):
        """ids [B, T]; mask_add [B, 1, T, Tk] or None; caches: per layer [k, v] (appended). Final normed hidden [B, T, d]."""
        torch, F = self.torch, self.torch.nn.functional
        B, T = ids.shape
        cos, sin = self.rope(start, T)
        x = self.w["model.embed_tokens.weight"][ids]
        rep = self.H // self.Hkv

        def rot(v):
            h = v.shape[-1] // 2
            return torch.cat((-v[..., h:], v[..., :h]), -1)

        for i in range(self.L):
            p = "model.layers.%d." % i
            h = self.norm(x, self.w[p + "input_layernorm.weight"])

            def lin(name, v):
                b = self.w.get(p + name + ".bias")
                return F.linear(v, self.w[p + name + ".weight"], b)

            q = lin("self_attn.q_proj", h).view(B, T, self.H, self.hd).transpose(1, 2)
            k = lin("self_attn.k_proj", h).view(B, T, self.Hkv, self.hd).transpose(1, 2)
            v = lin("self_attn.v_proj", h).view(B, T, self.Hkv, self.hd).transpose(1, 2)
            q = q * cos + rot(q) * sin
            k = k * cos + rot(k) * sin
            if caches is not None:
                if caches[i][0] is not None:
                    k = torch.cat((caches[i][0], k), 2)
                    v = torch.cat((caches[i][1], v), 2)
                caches[i][0], caches[i][1] = k, v
            kr = k.repeat_interleave(rep, 1)
            vr = v.repeat_interleave(rep, 1)
            s = torch.matmul(q, kr.transpose(-2, -1)) / math.sqrt(self.hd)
            if mask_add is not None:
                s = s + mask_add
            o = torch.matmul(torch.softmax(s, -1), vr).transpose(1, 2).reshape(B, T, self.H * self.hd)
            x = x + F.linear(o, self.w[p + "self_attn.o_proj.weight"])
            h = self.norm(x, self.w[p + "post_attention_layernorm.weight"])
            g = F.linear(h, self.w[p + "mlp.gate_proj.weight"])
            u = F.linear(h, self.w[p + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(g) * u, self.w[p + "mlp.down_proj.weight"])
        return self.norm(x, self.w["model.norm.weight"])

    def score(self, prompt, completions, chunk=256):
        """Teacher-forced log p and entropy of each completion token after the shared prompt (right-padded rows)."""
        torch = self.torch
        C = max(len(c) for c in completions)
        P = len(prompt)
        B = len(completions)
        ids = torch.zeros((B, P + C), dtype=torch.long)
        for b, c in enumerate(completions):
            ids[b, :P] = torch.tensor(prompt)
            ids[b, P:P + len(c)] = torch.tensor(c)
        ids = ids.to(self.dev)
        causal = torch.full((P + C, P + C), float("-inf"), device=self.dev).triu(1)
        with torch.inference_mode():
            h = self.hidden(ids, causal, 0, None)[:, P - 1:P + C - 1].reshape(B * C, self.d)
            logp, ent = [], []
            tgt = ids[:, P:].reshape(-1)
            for r0 in range(0, B * C, chunk):
                z = torch.matmul(h[r0:r0 + chunk], self.lm.t())
                lsm = torch.log_softmax(z, -1)
                logp.append(lsm.gather(-1, tgt[r0:r0 + chunk, None])[:, 0])
                ent.append(-(lsm.exp() * lsm).sum(-1))
            logp = torch.cat(logp).view(B, C)
            ent = torch.cat(ent).view(B, C)
        return [logp[b, :len(c)].tolist() for b, c in enumerate(completions)], [ent[b, :len(c)].tolist() for b, c in enumerate(completions)]

    def decode(self, prompts, new, greedy):
        """Prompts of one length; m new tokens each with the KV cache (append per step, as the engine's webgpu path)."""
        torch = self.torch
        B, P = len(prompts), len(prompts[0])
        ids = torch.tensor(prompts, device=self.dev)
        caches = [[None, None] for _ in range(self.L)]
        out, lps = [], []
        with torch.inference_mode():
            causal = torch.full((P, P), float("-inf"), device=self.dev).triu(1)
            h = self.hidden(ids, causal, 0, caches)[:, -1]
            pos = P
            for step in range(new):
                lsm = torch.log_softmax(torch.matmul(h, self.lm.t()), -1)
                nxt = lsm.argmax(-1, keepdim=True) if greedy else torch.multinomial(lsm.exp(), 1)
                out.append(nxt)
                lps.append(lsm.gather(-1, nxt))
                if step + 1 < new:
                    h = self.hidden(nxt, None, pos, caches)[:, -1]
                    pos += 1
        return torch.cat(out, 1).tolist(), torch.cat(lps, 1).tolist()


def main():
    threads = int(os.environ.get("TORCH_HF_THREADS", "2"))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(threads))
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": "torch not importable: %s" % e}), flush=True)
        return 1
    torch.set_num_threads(threads)
    device = os.environ.get("TORCH_HF_DEVICE", "cpu")
    if device != "cpu":
        if not torch.cuda.is_available():
            print(json.dumps({"error": "TORCH_HF_DEVICE=%s: torch.cuda.is_available() is False" % device}), flush=True)
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False
    model = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req.get("op")
            if op == "load":
                t0 = time.perf_counter()
                model = Model(torch, req["dir"], device)
                ans = {"params": model.params, "seconds": round(time.perf_counter() - t0, 3), "torch_version": torch.__version__, "threads": threads,
                       "device": device}
            elif op == "score":
                rates = []
                for _ in range(max(1, int(req.get("n", 1)))):
                    t0 = time.perf_counter()
                    lp, ent = model.score(req["prompt"], req["completions"])
                    rates.append(sum(len(c) for c in req["completions"]) / (time.perf_counter() - t0))
                ans = {"logp": lp, "entropy": ent, "tokens_per_s": [round(r, 2) for r in rates]}
            elif op == "decode":
                rates = []
                for _ in range(max(1, int(req.get("n", 1)))):
                    t0 = time.perf_counter()
                    ids, lp = model.decode(req["prompts"], int(req["new"]), bool(req.get("greedy", True)))
                    rates.append(len(req["prompts"]) * int(req["new"]) / (time.perf_counter() - t0))
                ans = {"ids": ids, "logp": lp, "tokens_per_s": [round(r, 2) for r in rates]}
            else:
                ans = {"error": "unknown request %s" % line.strip()[:200]}
        except Exception as e:  # noqa: BLE001 - a bad request gets an answer, not a dead server
            ans = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(ans) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
