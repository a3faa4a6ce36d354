"""ktae, key-token advantage estimation (arXiv 2505.16826; the authors' xiaolizh1/KTAE). Per group, every token id gets a
bonus KT in (-1, 1) from how its appearance splits the group's correct and wrong rollouts, and
A-hat_{i,t} = A_i / (std of the group's A + 1e-6) + KT[y_{i,t}]. For an id in a / b of the correct / wrong rollouts (c / d
the others):
  F  = exp(-2p), p the two-sided Fisher exact p of [[a, b], [c, d]] (0 when p = 1)
  IG = H(Y) - H(Y | X) in bits
  x  = Cohen's h, asin sqrt(a/(a+c)) - asin sqrt(b/(b+d)), plus (with tf) the BM25-style term-frequency ratio
  KT = (sigmoid((alpha F + beta IG) x / (alpha + beta)) - 0.5) * 2
A group with no correct or no wrong rollout gets no bonus; nor do the end-of-sequence ids. Counts are integers, so the
bonus is computed in float64 with Python's math, as src/engine/credit/ktae.ts does; the shared vectors hold the two to
the same numbers."""

import math

import torch

from credit_lens.batch import TokenBatch


def weights(batch: TokenBatch, params: dict) -> torch.Tensor:
    raise AssertionError("ktae sets A-hat itself; its weight is A-hat / A")


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact_p(a: int, b: int, c: int, d: int) -> float:
    """Two-sided: the sum of the probabilities of the tables at most as likely as the observed one (R's tolerance)."""
    r1, c1, n = a + b, a + c, a + b + c + d

    def log_p(k: int) -> float:
        return _log_comb(c1, k) + _log_comb(n - c1, r1 - k) - _log_comb(n, r1)

    obs = log_p(a)
    p = sum(math.exp(log_p(k)) for k in range(max(0, r1 + c1 - n), min(r1, c1) + 1) if log_p(k) <= obs + 1e-7)
    return min(1.0, p)


def _h2(p: float) -> float:
    return -p * math.log2(p) if p > 0 else 0.0


def information_gain(a: int, b: int, c: int, d: int) -> float:
    n = a + b + c + d
    if n == 0:
        return 0.0

    def cond(x: int, y: int) -> float:
        return _h2(x / (x + y)) + _h2(y / (x + y)) if x + y > 0 else 0.0

    hy = _h2((a + c) / n) + _h2((b + d) / n)
    return hy - ((a + b) / n * cond(a, b) + (c + d) / n * cond(c, d))


def key_token_bonus(ids: list[list[int]], correct: list[bool], params: dict, exclude=frozenset()) -> dict[int, float]:
    """KT per token id of one group: ids[i] rollout i's valid tokens, correct[i] whether it solved the task."""
    nc = sum(correct)
    nw = len(correct) - nc
    if nc == 0 or nw == 0:
        return {}
    seen = ({}, {})  # wrong, correct: rollouts an id appears in
    hist = ({}, {})  # its occurrences
    tokens = [0, 0]
    for row, ok in zip(ids, correct):
        for i in set(row):
            seen[ok][i] = seen[ok].get(i, 0) + 1
        for i in row:
            hist[ok][i] = hist[ok].get(i, 0) + 1
        tokens[ok] += len(row)
    k1, bm = 2.0, 0.5
    avg = (tokens[1] + tokens[0]) / 2
    kc = k1 * (1 - bm + bm * tokens[1] / avg)
    kw = k1 * (1 - bm + bm * tokens[0] / avg)

    def tf(count: int, total: int, k: float) -> float:
        f = count / total if total > 0 else 0.0
        return f * (k1 + 1) / (f + k)

    alpha, beta = float(params["alpha"]), float(params["beta"])
    out = {}
    for i in {x for row in ids for x in row}:
        if i in exclude:
            out[i] = 0.0
            continue
        a, b = seen[1].get(i, 0), seen[0].get(i, 0)
        c, d = nc - a, nw - b
        pv = fisher_exact_p(a, b, c, d)
        f = 0.0 if abs(pv - 1) < 1e-12 else math.exp(-2 * pv)
        ig = information_gain(a, b, c, d)
        x = math.asin(math.sqrt(a / (a + c))) - math.asin(math.sqrt(b / (b + d)))
        if params["tf"]:
            tc = tf(hist[1].get(i, 0), tokens[1], kc)
            tw = tf(hist[0].get(i, 0), tokens[0], kw)
            x += tc / (tw + 1e-5) - tw / (tc + 1e-5)
        key = (alpha * f + beta * ig) * x / (alpha + beta)
        # the term-frequency ratio divides by 1e-5 where an id is absent from one side, so key can be ~1e5: a sigmoid
        # that does not overflow (the engine's Math.exp gives Infinity and the same limit)
        sig = 1 / (1 + math.exp(-key)) if key >= 0 else math.exp(key) / (1 + math.exp(key))
        out[i] = (sig - 0.5) * 2
    return out


def advantages(batch: TokenBatch, params: dict, episode_advantages: torch.Tensor) -> torch.Tensor:
    ids = batch.need("ids", "ktae")
    success = batch.need("success", "ktae").tolist()
    valid = batch.valid
    adv = episode_advantages.detach().to(torch.float64).cpu()
    out = torch.zeros(valid.shape, dtype=torch.float64)
    rows = [[int(x) for x, m in zip(r, v) if m] for r, v in zip(ids.tolist(), valid.tolist())]
    for members in batch.group_members("ktae"):
        kt = key_token_bonus(
            [rows[i] for i in members], [bool(success[i]) for i in members], params, set(batch.eos_ids)
        )
        a = adv[members]
        std = a.std(unbiased=True) if len(members) > 1 else torch.zeros((), dtype=torch.float64)
        scaled = (a - a.mean()) / (std + 1e-6)
        for k, i in enumerate(members):
            for t, token in enumerate(rows[i]):
                out[i, t] = scaled[k] + kt.get(token, 0.0)
    return out.to(valid.device)
