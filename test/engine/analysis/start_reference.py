# Independent reference for the gate over warm starts (core/start_gate.ts): the contrast within each start, its
# variance over the starts, the method × instance interaction added back, Satterthwaite df, Student t by Simpson
# integration. Shares no code with the engine; run: python3 start_reference.py < cases.json
import math, sys, json
def tpdf(x, df): return math.exp(math.lgamma((df+1)/2) - math.lgamma(df/2)) / math.sqrt(df*math.pi) * (1 + x*x/df) ** (-(df+1)/2)
def tsf2(t, df, N=200000):
    a = abs(t); h = 2*a/N; s = tpdf(-a, df) + tpdf(a, df)
    for k in range(1, N): s += (4 if k % 2 else 2) * tpdf(-a + k*h, df)
    return 1 - s*h/3
def avg(xs): return sum(xs)/len(xs)
def var(xs): m = avg(xs); return sum((x-m)**2 for x in xs)/(len(xs)-1)
def startgate(strata):  # strata: list of sides; a side is (sign, runs[r][i])
    K = len(strata); n = len(strata[0][0][1][0])
    deltas = [sum(sg*avg([avg(r) for r in runs]) for sg, runs in st) for st in strata]
    diff = avg(deltas); sv = var(deltas)
    d = [sum(sg*avg([r[i] for r in runs]) for st in strata for sg, runs in st)/K for i in range(n)]
    within = sum(avg([var([r[i] for r in runs]) for i in range(n)])/len(runs)/K/K for st in strata for sg, runs in st if len(runs) >= 2)
    inst = max(0, var(d) - within)
    parts = [(sv/K, K-1)] + ([(inst/n, n-1)] if inst > 0 else [])
    V = sum(v for v, _ in parts); df = V*V/sum(v*v/f for v, f in parts)
    t = diff/math.sqrt(V)
    return dict(deltas=deltas, diff=diff, start_var=sv, inst=inst, se=math.sqrt(V), df=df, t=t, p=tsf2(t, df))
cases = json.load(sys.stdin)
print(json.dumps({k: startgate(v) for k, v in cases.items()}, indent=1))
