// Adam (torch.optim.Adam defaults: β1 0.9, β2 0.999, eps 1e-8, no weight decay) with its state kept as
// named tensors so a checkpoint can save and restore it exactly; plus torch-style global-norm clipping.
//
// On the wasm backend one update is a single SIMD pass per parameter that rewrites the parameter and both moments in
// place (adamInPlace, kernels/fused.ts), instead of twelve kernels per parameter, each with its own output buffer. It
// rounds every intermediate to float32 where the kernels do, so it gives the op sequence's bits (tested against it). A
// parameter whose buffer another tensor shares, and every parameter on other backends, takes the op sequence; on
// webgpu the update is three WGSL kernels per parameter with its numbers as uniforms (kernels/webgpu_adam.ts).
import * as tf from '@tensorflow/tfjs';
import { adamStep } from './ops';

export interface NamedArray {
  shape: number[];
  data: Float32Array;
}

export class Adam {
  private m = new Map<string, tf.Variable>();
  private v = new Map<string, tf.Variable>();
  step = 0;
  /** Update in place where the backend allows (see the file's head); false forces the op sequence everywhere. */
  inPlace = true;

  constructor(
    public lr: number,
    readonly beta1 = 0.9,
    readonly beta2 = 0.999,
    readonly eps = 1e-8,
  ) {}

  /** Apply one update. `grads` are already clipped. */
  apply(params: Map<string, tf.Variable>, grads: Record<string, tf.Tensor>): void {
    this.step++;
    const bc1 = 1 - this.beta1 ** this.step;
    const bc2 = 1 - this.beta2 ** this.step;
    for (const [name, p] of params) {
      const g = grads[name];
      if (!g) continue;
      let m = this.m.get(name);
      let v = this.v.get(name);
      if (!m || !v) {
        m = tf.tidy(() => tf.variable(tf.zerosLike(p), false));
        v = tf.tidy(() => tf.variable(tf.zerosLike(p), false));
        this.m.set(name, m);
        this.v.set(name, v);
      }
      if (!(this.inPlace && this.applyInPlace(p, g, m, v, bc1, bc2))) this.applyOps(p, g, m, v, bc1, bc2);
    }
  }

  /** The update as tfjs ops: every backend. */
  private applyOps(p: tf.Variable, g: tf.Tensor, m: tf.Variable, v: tf.Variable, bc1: number, bc2: number): void {
    tf.tidy(() => {
      const m1 = m.mul(this.beta1).add(g.mul(1 - this.beta1));
      const v1 = v.mul(this.beta2).add(g.square().mul(1 - this.beta2));
      m.assign(m1);
      v.assign(v1);
      const update = m1.div(bc1).div(v1.div(bc2).sqrt().add(this.eps)).mul(this.lr);
      p.assign(p.sub(update));
    });
  }

  /** The same update in place (wasm), or in three WGSL kernels (webgpu): false when neither can run. */
  private applyInPlace(p: tf.Variable, g: tf.Tensor, m: tf.Variable, v: tf.Variable, bc1: number, bc2: number): boolean {
    const f = Math.fround;
    const s = { b1: f(this.beta1), c1: f(1 - this.beta1), b2: f(this.beta2), c2: f(1 - this.beta2), d1: f(bc1), d2: f(bc2), eps: f(this.eps), lr: f(this.lr) };
    return adamStep(p, g, m, v, s);
  }

  async exportState(): Promise<Record<string, NamedArray>> {
    const out: Record<string, NamedArray> = {};
    for (const [name, t] of this.m) out[`m.${name}`] = { shape: t.shape, data: (await t.data()) as Float32Array };
    for (const [name, t] of this.v) out[`v.${name}`] = { shape: t.shape, data: (await t.data()) as Float32Array };
    return out;
  }

  importState(step: number, state: Record<string, NamedArray>): void {
    this.dispose();
    this.step = step;
    for (const [key, a] of Object.entries(state)) {
      const kind = key.slice(0, 2);
      const name = key.slice(2);
      const t = tf.tidy(() => tf.variable(tf.tensor(a.data, a.shape), false));
      (kind === 'm.' ? this.m : this.v).set(name, t);
    }
  }

  dispose(): void {
    for (const t of this.m.values()) t.dispose();
    for (const t of this.v.values()) t.dispose();
    this.m.clear();
    this.v.clear();
  }
}

/**
 * Global L2 norm of all gradients and, when it exceeds maxNorm, the same scaling torch's clip_grad_norm_
 * applies (max_norm / (total_norm + 1e-6)). Returns the pre-clip norm; a non-finite norm is returned as is
 * and the gradients are left untouched (the caller skips the step).
 */
export async function clipByGlobalNorm(grads: Record<string, tf.Tensor>, maxNorm: number): Promise<{ norm: number; grads: Record<string, tf.Tensor> }> {
  // read asynchronously: a GPU backend has no synchronous read
  // a left fold of adds, not one tf.addN: webgpu's AddN binds every input at once, more storage buffers than an adapter
  // need allow (8 per shader stage); the fold sums in addN's order, so the bits on wasm and cpu are addN's
  const sq = tf.tidy(() =>
    Object.values(grads)
      .map((g) => g.square().sum())
      .reduce((a, b) => a.add(b)),
  );
  const norm = Math.sqrt((await sq.data())[0]);
  sq.dispose();
  if (!Number.isFinite(norm) || maxNorm <= 0 || norm <= maxNorm) return { norm, grads };
  const scale = maxNorm / (norm + 1e-6);
  const out: Record<string, tf.Tensor> = {};
  for (const [k, g] of Object.entries(grads)) {
    out[k] = g.mul(scale);
    g.dispose();
  }
  return { norm, grads: out };
}
