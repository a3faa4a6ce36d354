# Independent reference for the run-level gate (two-way variance with the run variance pooled over the sides,
# Satterthwaite df, Student t by Simpson integration).
import math, sys, json
def tpdf(x, df): return math.exp(math.lgamma((df+1)/2) - math.lgamma(df/2)) / math.sqrt(df*math.pi) * (1 + x*x/df) ** (-(df+1)/2)
def tsf2(t, df, N=200000):
    # two-sided p = 1 - ∫_{-|t|}^{|t|} pdf
    a = abs(t); h = 2*a/N; s = tpdf(-a, df) + tpdf(a, df)
    for k in range(1, N): s += (4 if k % 2 else 2) * tpdf(-a + k*h, df)
    return 1 - s*h/3
def var(xs): m = sum(xs)/len(xs); return sum((x-m)**2 for x in xs)/(len(xs)-1)
def gate(sides):  # sides: list of (sign, runs[s][i])
    n = len(sides[0][1][0])
    diff = sum(sg*sum(sum(r)/n for r in runs)/len(runs) for sg, runs in sides)
    # one run variance pooled over the sides that have 2 or more runs, df Σ (S_k − 1)
    known = [(var([sum(r)/n for r in runs]), len(runs)-1) for sg, runs in sides if len(runs) >= 2]
    dfp = sum(f for _, f in known); sp2 = sum(v*f for v, f in known)/dfp
    parts = [(sp2*sum(1/len(runs) for sg, runs in sides), dfp)]
    d = [sum(sg*sum(r[i] for r in runs)/len(runs) for sg, runs in sides) for i in range(n)]
    within = sum(sum(var([r[i] for r in runs]) for i in range(n))/n/len(runs) for sg, runs in sides)
    inst = max(0, var(d) - within)
    if inst > 0: parts.append((inst/n, n-1))
    V = sum(v for v, _ in parts); df = V*V/sum(v*v/f for v, f in parts)
    t = diff/math.sqrt(V)
    return dict(diff=diff, se=math.sqrt(V), df=df, t=t, p=tsf2(t, df), inst=inst)
cases = json.load(sys.stdin)
print(json.dumps({k: gate(v) for k, v in cases.items()}, indent=1))
