// The probe's figure for `npm run bench` (its target: ≤ 60 s): K episodes of a GRPO step, every position, M rollouts,
// in this process or through a server.
import type { Episode } from '../session/rollout';
import type { Session } from '../session/session';
import { estimateEpisode, probePositions } from '../model/prefix_values';
import { spreadEpisodes } from '../probe/probe';
import type { Sampler } from '../model/sampling';

export async function probeBench(
  s: Session,
  episodes: Episode[],
  k: number,
  rollouts: number,
  sampler?: Sampler,
): Promise<{ episodes: number; continuations: number; mean_length: number; seconds: number }> {
  const chosen = spreadEpisodes(
    episodes.map((e) => e.example.id),
    k,
  );
  const t0 = performance.now();
  let continuations = 0;
  let tokens = 0;
  for (const i of chosen) {
    const e = episodes[i];
    tokens += e.ids.length;
    const positions = probePositions(e.ids.length, { kind: 'every' }, []);
    await estimateEpisode(
      sampler ?? s.model,
      s.tokenizer,
      { episode: i, example: e.example, promptIds: e.promptIds, ids: e.ids, reward: e.reward.total },
      positions,
      {
        rollouts,
        temperature: s.cfg.grpo.temperature,
        topP: s.cfg.grpo.top_p,
        maxNewTokens: s.cfg.grpo.max_new_tokens,
        seed: s.cfg.seed,
        step: 1,
        reward: (text, ex) => s.task.reward(text, ex).total,
      },
    );
    continuations += e.ids.length * rollouts;
  }
  return { episodes: chosen.length, continuations, mean_length: tokens / chosen.length, seconds: (performance.now() - t0) / 1000 };
}
