// `credit-lens serve`: a run's policy (or a checkpoint, or a Hugging Face folder) behind SGLang's and vLLM's APIs until
// Ctrl-C.
import { UserError } from '../core/errors';
import { BACKENDS } from '../config/base';
import { serve } from '../serving/serve';
import { API_KEY_ENV } from '../serving/guard';
import { choiceFlag, flag, intFlag, parseArgs } from './args';

export const SERVE_USAGE = `usage: credit-lens serve <run-dir | checkpoint | HF folder> [--step N] [--host 127.0.0.1] [--port 30000] [--backend B]
                       [--api-key KEY] [--allow-path FOLDER]...
  Serves the model on SGLang's native API (POST /generate with input_ids, GET /model_info, POST /update_weights_from_disk,
  POST /flush_cache, GET /health) and vLLM's (POST /v1/completions with a token-id prompt, GET /v1/models), so
  \`credit-lens probe --server\` and any client of either can sample from it. A run folder serves its newest checkpoint,
  or with --step N the policy that sampled step N (what \`probe --step N\` uses). Requests that arrive together are
  sampled in one batch. It listens on 127.0.0.1 unless --host says otherwise; Ctrl-C stops it.
  With --api-key (or $${API_KEY_ENV}) every request but GET /health needs Authorization: Bearer <key>; the
  client side (probe --server, import --score-server, rollout.server) sends $${API_KEY_ENV}. Without a key only a
  loopback server loads weights or adapters, and a request must address it by a name of its own. Weights and adapters
  load only from the served model's folder and each --allow-path.`;

export async function cmdServe(argv: string[]): Promise<number> {
  const a = parseArgs(argv, { valued: ['step', 'host', 'port', 'backend', 'api-key', 'allow-path'] }, SERVE_USAGE);
  if (a.positional.length !== 1) throw new UserError(`serve needs exactly one run folder, checkpoint or Hugging Face folder\n${SERVE_USAGE}`);
  const backend = a.flags.has('backend') ? choiceFlag(a, 'backend', BACKENDS, 'auto') : undefined;
  const port = intFlag(a, 'port', 0);
  if (port !== undefined && port > 65535) throw new UserError(`--port: got ${port}; expected 0–65535`);
  const s = await serve({
    spec: a.positional[0],
    step: intFlag(a, 'step', 1),
    host: flag(a, 'host'),
    port,
    backend,
    // on the command line as SGLang and vLLM take it; the variable keeps it out of `ps`
    apiKey: flag(a, 'api-key') || process.env[API_KEY_ENV] || null,
    allowPaths: a.flags.get('allow-path') ?? [],
    log: (m) => process.stderr.write(`${m}\n`),
  });
  // the URL on stdout, alone, so a script (or a test) can read where it listens
  process.stdout.write(`${s.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = (sig: string) => {
      process.stderr.write(`${sig}: stopping the server\n`);
      void s.close().then(resolve);
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  return 0;
}
