# Independent reference for the cancellation test's controls (src/engine/probe/cancellation.ts). It writes a fixed
# fixture, cancellation_fixture.json (seeded numpy draws), and prints what the engine must report on it. The controlled
# test here builds the full design, a dummy column per episode and per quintile of 1 - pi and 1 - pi itself beside [realized > 0], and
# solves it with numpy's lstsq (the engine demeans within episodes instead); the sandwich is CR1 with G/(G - 1),
# clustered by prompt, p from scipy's t on G - 1 df. Shares no code with the engine. Run: python3 cancellation_reference.py
import json, os
import numpy as np
from scipy import stats

rng = np.random.default_rng(7)
episodes = []
for prompt in range(12):
    for k in range(2):
        n = 8
        adv = [1.0, -1.0][k] if prompt % 3 else [1.0, 1.0][k]
        u = rng.uniform(0.02, 0.9, n)  # 1 - pi
        logprobs = np.log(1 - u)
        # the mechanical part: delta leans with the episode's sign in proportion to 1 - pi, plus noise
        delta = np.sign(adv) * 0.3 * u + rng.normal(0, 0.08, n)
        # an update that boosts uncertain tokens more (knows only 1 - pi), plus noise; a true effect of +0.05 on delta
        realized = np.sign(adv) * (u - 0.45) + rng.normal(0, 0.15, n)
        delta = delta + 0.05 * (realized > 0)
        values = np.concatenate([[0.5], 0.5 + np.cumsum(delta)])
        episodes.append(dict(prompt=prompt, n=n, positions=list(range(n + 1)), values=[round(float(v), 6) for v in values],
                             advantage=adv, logprobs=[round(float(v), 6) for v in logprobs],
                             realized=[round(float(v), 6) for v in realized], ownAdv=[adv] * n))
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'cancellation_fixture.json'), 'w') as f:
    json.dump(episodes, f)

def within(sign, boosted):
    by = {}
    for i, e in enumerate(episodes):
        if np.sign(e['advantage']) != sign: continue
        d = np.diff(e['values']); b = boosted(e)
        up, down = d[b > 0], d[b < 0]
        if len(up) and len(down): by.setdefault(e['prompt'], []).append(up.mean() - down.mean())
    return np.mean([v for vs in by.values() for v in vs])

def stratified(sign):
    rows = []
    for i, e in enumerate(episodes):
        if np.sign(e['advantage']) != sign: continue
        d = np.diff(e['values'])
        for t in range(e['n']):
            r = e['realized'][t]
            if r == 0: continue
            rows.append((d[t], 1.0 if r > 0 else 0.0, 1 - np.exp(e['logprobs'][t]), i, e['prompt']))
    y = np.array([r[0] for r in rows]); us = np.array([r[2] for r in rows])
    cuts = np.percentile(us, [20, 40, 60, 80])  # numpy's linear interpolation
    strata = np.array([(u > cuts).sum() for u in us])
    eps = sorted(set(r[3] for r in rows)); used = sorted(set(strata))[1:]
    X = np.column_stack([[r[1] for r in rows], us] + [(strata == s).astype(float) for s in used]
                        + [np.array([r[3] == e for r in rows], float) for e in eps])
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    u = y - X @ beta
    bread = np.linalg.pinv(X.T @ X)
    prompts = np.array([r[4] for r in rows]); G = len(set(prompts))
    meat = sum(np.outer(X[prompts == g].T @ u[prompts == g], X[prompts == g].T @ u[prompts == g]) for g in set(prompts))
    V = bread @ meat @ bread * G / (G - 1)
    se = np.sqrt(V[0, 0]); t = beta[0] / se
    return dict(beta=beta[0], se=se, p=2 * stats.t.sf(abs(t), G - 1), lo=beta[0] - stats.t.ppf(0.975, G - 1) * se, rows=len(rows), prompts=G)

def control(e):
    u = 1 - np.exp(np.array(e['logprobs']))
    return np.sign(e['advantage']) * (u - u.mean())

print('within_positive', within(1, lambda e: np.array(e['realized'])))
print('within_negative', within(-1, lambda e: np.array(e['realized'])))
print('control_positive', within(1, control))
print('control_negative', within(-1, control))
print('stratified_positive', stratified(1))
print('stratified_negative', stratified(-1))
