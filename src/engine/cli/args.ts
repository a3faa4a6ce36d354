// One command-line parser for every `credit-lens` command: `--name value`, `--name=value`, repeated flags (`--set`),
// booleans, and numbers checked where they are read. An unknown flag is an error that names it, suggests the closest
// known one and prints the command's usage.
import { levenshtein } from '../core/text';
import { UserError } from '../core/errors';

export interface ParsedArgs {
  positional: string[];
  /** every value of each valued flag, in order; booleans map to ['true'] */
  flags: Map<string, string[]>;
}

function closestFlag(k: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of known) {
    const d = levenshtein(k, c);
    if (d < bestD) {
      best = c;
      bestD = d;
    }
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(k.length / 3)) ? best : undefined;
}

export function parseArgs(argv: readonly string[], spec: { valued?: readonly string[]; boolean?: readonly string[] }, usage: string): ParsedArgs {
  const valued = spec.valued ?? [];
  const boolean = spec.boolean ?? [];
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--') || a === '--') {
      positional.push(a);
      continue;
    }
    const [k, inline] = a.slice(2).split(/=(.*)/s, 2);
    if (boolean.includes(k) && inline === undefined) {
      flags.set(k, ['true']);
      continue;
    }
    if (!valued.includes(k)) {
      const guess = closestFlag(k, [...valued, ...boolean]);
      throw new UserError(`unknown option --${k}${guess ? `; did you mean --${guess}?` : ''}\n${usage}`);
    }
    const v = inline ?? argv[++i];
    if (v === undefined) throw new UserError(`--${k} needs a value\n${usage}`);
    flags.set(k, [...(flags.get(k) ?? []), v]);
  }
  return { positional, flags };
}

/** The last value of `--name`, or undefined. */
export function flag(args: ParsedArgs, name: string): string | undefined {
  return args.flags.get(name)?.at(-1);
}

/** `--name`, one of `choices` (default `dflt`); anything else is a UserError naming the choices. */
export function choiceFlag<T extends string>(args: ParsedArgs, name: string, choices: readonly T[], dflt: T): T {
  const v = flag(args, name) ?? dflt;
  if (!(choices as readonly string[]).includes(v)) throw new UserError(`--${name} ${v}: expected ${choices.join(', ').replace(/, ([^,]*)$/, ' or $1')}`);
  return v as T;
}

export function intFlag(args: ParsedArgs, name: string, min = 0): number | undefined {
  const v = flag(args, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^-?\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min)
    throw new UserError(`--${name}: got ${JSON.stringify(v)}; expected an integer ≥ ${min}`);
  return n;
}

export function numFlag(args: ParsedArgs, name: string, ok: (x: number) => boolean, what: string): number | undefined {
  const v = flag(args, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new UserError(`--${name}: got ${JSON.stringify(v)}; expected ${what}`);
  return n;
}

/**
 * The progress of a long command: with --progress-json one `{"progress": {done, total}}` line per report on stderr (the
 * extension's progress notification reads them), else a bar on stderr at most once a second; `unit` names what is counted.
 */
export function progressPrinter(args: ParsedArgs, unit: string): (done: number, total: number) => void {
  const t0 = Date.now();
  let last = 0;
  return (done, total) => {
    if (args.flags.has('progress-json')) {
      process.stderr.write(JSON.stringify({ progress: { done, total } }) + '\n');
      return;
    }
    if (done < total && Date.now() - last < 1000) return;
    last = Date.now();
    const w = 30;
    const f = total ? done / total : 1;
    const bar = `[${'#'.repeat(Math.round(f * w)).padEnd(w)}] ${done}/${total} ${unit} ${((Date.now() - t0) / 1000).toFixed(0)}s`;
    process.stderr.write(process.stderr.isTTY ? `\r${bar}${done >= total ? '\n' : ''}` : `${bar}\n`);
  };
}

/**
 * Ctrl-C or SIGTERM (the extension's Cancel) aborts the returned signal, saying `what` happens next; the command stops
 * between batches and keeps what is done. A second signal ends the process at once.
 */
export function stopOnSignals(what: string): AbortSignal {
  const abort = new AbortController();
  const onSignal = (sig: string) => {
    if (abort.signal.aborted) process.exit(130);
    process.stderr.write(`\n${sig}: ${what}\n`);
    abort.abort();
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  return abort.signal;
}
