// The `credit-lens` commands, declared once: name, usage, and the handler, loaded when the command runs (a command
// starts without loading the others' modules). main.ts dispatches through this table and prints its usage. A new
// command is its handler (run_commands.ts, data_commands.ts or a file of its own) and one entry below.
import { IMPORT_FORMATS } from '../../protocol/import_formats';
import { SERVER_APIS } from '../server_apis/catalog';

export interface Command {
  readonly name: string;
  /** the usage lines after `credit-lens ` */
  readonly usage: readonly string[];
  /** the handler, given the arguments after the command's name and the whole usage text (for its errors) */
  run(argv: string[], usage: string): Promise<number>;
}

const run = () => import('./run_commands');
const data = () => import('./data_commands');

export const COMMANDS: readonly Command[] = [
  {
    name: 'train',
    usage: ['train <config.credit.yaml> [--set key=value]... [--rpc] [--resume <run-dir>] [--run-dir <dir>]'],
    run: async (a, u) => (await run()).cmdTrain(a, u),
  },
  {
    name: 'reward',
    usage: ['reward <config.credit.yaml> [--set key=value]...   (the task as a JSON-lines worker on stdin/stdout: engine trl asks it)'],
    run: async (a, u) => (await run()).cmdReward(a, u),
  },
  {
    name: 'sweep',
    usage: ['sweep <config.credit.yaml> [--set key=value]... [--executor local|slurm] [--json] [--dry-run]'],
    run: async (a, u) => (await run()).cmdSweep(a, u),
  },
  {
    name: 'slurm',
    usage: ['slurm status <sweep-dir> [--json] [--wait]', 'slurm cancel <sweep-dir> [--task I]'],
    run: async (a, u) => (await run()).cmdSlurm(a, u),
  },
  {
    name: 'compare',
    usage: [
      'compare <run-dir>... --baseline <run-dir>... [--json] [--split test|validation] [--step N | --common-step] [--alpha A] [--power-for D] [--looks K]',
      'compare <run-dir>... --from-start [--json] [--split test|validation] [--step N] [--alpha A] [--power-for D] [--looks K]',
    ],
    run: async (a, u) => (await run()).cmdCompare(a, u),
  },
  { name: 'eval', usage: ['eval <run-dir> [--checkpoint N]'], run: async (a, u) => (await run()).cmdEval(a, u) },
  {
    name: 'results',
    usage: [
      'results <book.yaml> [--check | --write]   (every table of a results document, rebuilt from committed runs)',
      'results keep <run-dir>... --into <folder>',
    ],
    run: async (a, u) => (await import('./results_command')).cmdResults(a, u),
  },

  {
    name: 'rollouts',
    usage: [
      'rollouts paired <config.credit.yaml> [--groups N] [--checkpoint <run-or-checkpoint>] [--set key=value]...',
      'rollouts <run-dir> [--steps a:b] [--where EXPR] [--search REGEX] [--group-by token|prompt|step] [--sort [-]F] [--limit N] [--json|--csv]',
    ],
    run: async (a) => (await data()).cmdRollouts(a),
  },
  {
    name: 'importance',
    usage: ['importance train <config.credit.yaml> --rollouts <rollouts_gG.parquet> [--out dir]'],
    run: async (a) => (await data()).cmdImportance(a),
  },
  {
    name: 'analyze',
    usage: [
      'analyze <run-dir> [--json] [--out file] [--from-step N] [--to-step N] [--baseline <run-dir>]',
      '                    [--reasoning-regex RE] [--top-k N] [--contribution episode|weighted] [--probe]',
      'analyze --probe <run-dir> <run-dir> … [--json] [--out file]   (probes pooled over runs, the run as the unit)',
    ],
    run: async (a) => (await data()).cmdAnalyze(a),
  },
  {
    name: 'import',
    usage: [
      `import <file or folder> [--model <HF dir | run dir | checkpoint>] [--format ${['auto', ...IMPORT_FORMATS].join('|')}]`,
      '                   [--out dir] [--name N] [--tokenizer T] [--config C] [--set key=value]... [--strategy S] [--json]',
      '                   [--chat-template auto|apply|as-logged]',
      `                   [--score-server URL [--server-api ${SERVER_APIS.join('|')}] [--server-concurrency C] [--top-k K]]`,
    ],
    run: async (a) => (await data()).cmdImport(a),
  },
  {
    name: 'probe',
    usage: [
      'probe <run-dir> --step N [--episodes K | --episode i,j,…] [--rollouts M] [--positions every|segments:S|cutpoints:τ]',
      '                   [--temperature T] [--seed s] [--replace] [--json] [--progress-json]',
      `                   [--server URL [--server-api ${SERVER_APIS.join('|')}] [--server-concurrency C]]`,
    ],
    run: async (a) => (await import('./probe_command')).cmdProbe(a),
  },
  {
    name: 'serve',
    usage: ['serve <run-dir | checkpoint | HF folder> [--step N] [--host 127.0.0.1] [--port 30000] [--backend B] [--api-key K] [--allow-path F]...'],
    run: async (a) => (await import('./serve_command')).cmdServe(a),
  },
  {
    name: 'bench',
    usage: [
      'bench [--json] [--quick] [--profile [--backend wasm-blas|wasm]]',
      'bench --device [--local] [--quick] [--out <file.json>] [--torch-python <python>] [--torch-device cuda|cpu] [--tokenizer-dir <dir>]',
    ],
    run: async (a, u) => (await run()).cmdBench(a, u),
  },
  { name: 'schema', usage: ['schema [--out file]'], run: async (a, u) => (await run()).cmdSchema(a, u) },
  {
    name: 'export',
    usage: ['export tensorboard <run-dir>... [--replace] [--json]'],
    run: async (a, u) => (await data()).cmdExport(a, u),
  },
];

/** Every command's usage, as `credit-lens help` prints it. */
export function usage(): string {
  // a line that starts with spaces continues the one before it
  return ['usage:', ...COMMANDS.flatMap((c) => c.usage.map((u) => (u.startsWith(' ') ? `  ${u}` : `  credit-lens ${u}`)))].join('\n');
}
