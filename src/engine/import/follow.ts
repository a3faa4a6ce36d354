// `credit-lens import <dir> --follow`: a run that is still training, imported as it grows. The source folder is polled;
// a step is imported once it is whole, and never twice:
// - whole: a later step has appeared (the trainer moved on), or none of the step's files has changed for `settleMs`
//   (10 s: a veRL dump or a prime-rl export written in parts, with pauses between);
// - a line still being written (no newline yet) is not read until it ends;
// - records that arrive for a step already imported are reported, not imported;
// - records read for a step not yet imported are kept if their file is truncated, rewritten, rotated, deleted or becomes
//   unreadable before the step is whole, and the change is reported.
// The trainer's own metrics file is read as it grows too. The follow ends on a stop (Ctrl-C, the extension's Stop), or
// once nothing new has come for `untilIdle` seconds, and leaves a completed run directory of the whole steps.
import { statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { StoppedError, UserError, isUserError } from '../core/errors';
import { sleep } from '../core/files';
import { writeRunInfo } from '../rundir/rundir';
import {
  detectFormat,
  isTrainerMetricsFile,
  listImportFiles,
  readRows,
  recordsOf,
  type ImportedRecord,
  type ImportFormat,
  type ImportProblem,
} from './formats';
import { checkOptions, checkScorable, importConfig, Importer, type ImportOptions, type ImportResult } from './import';
import { findTrainerMetrics, TrainerMetrics } from './trainer_metrics';
import { annotationsKey, PRIME_STREAM, tracesDir } from './readers/prime_stream';

export interface FollowOptions extends ImportOptions {
  /** end once nothing new has come for this many seconds (undefined: until stopped) */
  untilIdle?: number;
  /** how often the folder is read (ms) */
  pollMs?: number;
  /** how long a step's files must stay unchanged to count as whole when no later step has appeared (ms) */
  settleMs?: number;
  /** each imported step, with the seconds from the moment it was whole to its tables written */
  onStep?: (step: number, latencySeconds: number) => void;
}

interface FileState {
  size: number;
  mtimeMs: number;
  /** when this follow last saw the file change (ms) */
  changedAt: number;
  /** read once more after it settled */
  settled: boolean;
  records: ImportedRecord[];
  problems: ImportProblem[];
  /** rows not whole yet (a prime-rl trace before its ship annotation): read again when they may be, skipped at the end */
  pending: ImportProblem[];
  /** a trace stream's annotations as last read (prime_stream.ts annotationsKey): when they move, the stream is read again */
  annotations?: string;
}

const SETTLE_MS = 10_000;

/** A record by what it says, not where it was read: the same completion read from a rotated file's new name is one. */
const recordKey = (r: ImportedRecord) => JSON.stringify([r.step, r.group, r.prompt, r.completion, r.reward, r.advantage, r.success]);

export async function followImport(o: FollowOptions): Promise<ImportResult> {
  const cfg = importConfig(o);
  checkOptions(o, cfg);
  const source = resolve(o.source);
  const root = (() => {
    try {
      return statSync(source).isDirectory() ? source : join(source, '..');
    } catch {
      throw new UserError(`import --follow: cannot read ${source}: no such file or folder`);
    }
  })();
  const pollMs = o.pollMs ?? 1000;
  const settleMs = o.settleMs ?? SETTLE_MS;
  const files = new Map<string, FileState>();
  const imported = new Set<number>();
  const lateWarned = new Set<number>();
  const importedCounts = new Map<number, number>();
  const reported = new Set<string>();
  let format: ImportFormat | null = o.format && o.format !== 'auto' ? o.format : null;
  let imp: Importer | null = null;
  let metrics: TrainerMetrics | null = null;
  let lastNew = Date.now();
  /** when each step was first seen whole (for the latency the bench reports) */
  const wholeSince = new Map<number, number>();
  /**
   * Records of steps not yet imported that their file no longer holds (it was truncated, rewritten, rotated, deleted or
   * became unreadable under the follow): kept until their step is imported, so a step once read is never lost.
   */
  const carried: ImportedRecord[] = [];
  /** what changed under the follow before the run directory existed, logged once it does */
  const changes: string[] = [];
  const say = (m: string) => (imp ? imp.log('warn', m) : changes.push(m));
  /** The records of `before` (of steps not imported) that `after` does not hold, as a multiset (a group may repeat one). */
  const keepLost = (shown: string, before: ImportedRecord[], after: ImportedRecord[], why: string) => {
    const left = new Map<string, number>();
    for (const r of after) left.set(recordKey(r), (left.get(recordKey(r)) ?? 0) + 1);
    const lost = before.filter((r) => {
      const n = left.get(recordKey(r)) ?? 0;
      if (n > 0) left.set(recordKey(r), n - 1);
      return n === 0 && !imported.has(r.step);
    });
    if (!lost.length) return;
    carried.push(...lost);
    const steps = [...new Set(lost.map((r) => r.step))].sort((a, b) => a - b);
    say(
      `${shown} ${why} under the follow: the ${lost.length} record${lost.length === 1 ? '' : 's'} of step${steps.length === 1 ? '' : 's'} ` +
        `${steps.join(', ')} read from it before are kept, and imported with their step`,
    );
  };

  const scan = async (): Promise<boolean> => {
    let names: string[];
    try {
      // before the first rollouts, the trainer's metrics log may be all there is
      const links: ImportProblem[] = [];
      names = listImportFiles(source, links).filter((f) => !isTrainerMetricsFile(f));
      for (const p of links.filter((x) => !reported.has(`${x.file}:link`))) {
        reported.add(`${p.file}:link`);
        say(`skipped ${p.file}: ${p.reason}`);
      }
    } catch (e) {
      // an empty folder: the trainer has not written yet
      if (isUserError(e) && /no \.jsonl|no such file/.test(e.message)) return false;
      throw e;
    }
    let changed = false;
    const now = Date.now();
    const listed = new Set(names);
    for (const [f, prev] of files) {
      if (listed.has(f) && statSync(f, { throwIfNoEntry: false })) continue;
      keepLost(relative(root, f) || f, prev.records, [], 'disappeared (rotated, moved or deleted)');
      files.delete(f);
      changed = true;
    }
    const annotationsOf = new Map<string, string>();
    for (const f of names) {
      const st = statSync(f, { throwIfNoEntry: false });
      if (!st) continue;
      const prev = files.get(f);
      // a prime-rl trace stream's lines are whole only with their annotations, written beside it later
      let annotations: string | undefined;
      if (PRIME_STREAM.test(f)) {
        const dir = tracesDir(f);
        if (!annotationsOf.has(dir)) annotationsOf.set(dir, annotationsKey(dir));
        annotations = annotationsOf.get(dir);
      }
      const annotated = !!prev && prev.annotations !== annotations;
      const moved = !prev || prev.size !== st.size || prev.mtimeMs !== st.mtimeMs || annotated;
      // a file that changed is read whole up to its last newline; once it has settled, once more with any last line
      // that never ended (a problem then, as in a plain import)
      const settling = !moved && !prev.settled && now - prev.changedAt >= settleMs;
      if (!moved && !settling) continue;
      const shown = relative(root, f) || f;
      const problems: ImportProblem[] = [];
      const rows = await readRows(f, shown, problems, { wholeLinesOnly: moved });
      if (rows.length && !format) format = detectFormat(names, rows[0].value);
      const records = format ? recordsOf(rows, format, f, shown, problems) : [];
      if (prev) {
        const unreadable = problems.find((p) => p.line === 0 && /^cannot read/.test(p.reason));
        const why = unreadable ? `became unreadable (${unreadable.reason})` : st.size < prev.size ? 'was truncated' : 'was rewritten';
        keepLost(shown, prev.records, records, why);
      }
      // a file first seen is as old as its last write: one written long before the follow started has settled
      const changedAt = !prev ? Math.min(now, st.mtimeMs) : moved ? now : prev.changedAt;
      const pending = problems.filter((p) => p.pending);
      if (pending.length && !prev?.pending.length) {
        const one = pending.length === 1;
        say(`${shown}: ${pending.length} row${one ? ' waits for its' : 's wait for their'} annotations (${pending[0].reason}); read again as they arrive`);
      }
      files.set(f, {
        size: st.size,
        mtimeMs: st.mtimeMs,
        changedAt,
        settled: !moved,
        records,
        problems: problems.filter((p) => !p.pending),
        pending,
        annotations,
      });
      if (moved) changed = true;
    }
    return changed;
  };

  /** The steps not yet imported that are whole now, ascending, with their records and their files' problems. */
  const wholeSteps = () => {
    const now = Date.now();
    const byStep = new Map<number, { records: ImportedRecord[]; files: Set<string> }>();
    for (const [f, st] of files)
      for (const r of st.records) {
        const e = byStep.get(r.step) ?? { records: [], files: new Set<string>() };
        e.records.push(r);
        e.files.add(f);
        byStep.set(r.step, e);
      }
    // a carried record that a file now holds again (a rotated file under its new name) is there once
    const held = new Map<string, number>();
    for (const e of byStep.values()) for (const r of e.records) held.set(recordKey(r), (held.get(recordKey(r)) ?? 0) + 1);
    for (const r of carried) {
      const n = held.get(recordKey(r)) ?? 0;
      if (n > 0) {
        held.set(recordKey(r), n - 1);
        continue;
      }
      const e = byStep.get(r.step) ?? { records: [], files: new Set<string>() };
      e.records.push(r);
      byStep.set(r.step, e);
    }
    const latest = Math.max(-1, ...byStep.keys());
    const out: { step: number; records: ImportedRecord[]; problems: ImportProblem[] }[] = [];
    for (const step of [...byStep.keys()].sort((a, b) => a - b)) {
      const e = byStep.get(step)!;
      if (imported.has(step)) {
        if (!lateWarned.has(step) && e.records.length !== importedCounts.get(step)) {
          lateWarned.add(step);
          imp?.log('warn', `step ${step} changed after it was imported (its files were written to again); the import keeps what it had`);
        }
        continue;
      }
      const settled = [...e.files].every((f) => now - files.get(f)!.changedAt >= settleMs);
      if (!(step < latest || settled)) continue;
      if (!wholeSince.has(step)) wholeSince.set(step, now);
      // a file holding several steps reports its bad lines once, with the first of them
      const problems = [...e.files].flatMap((f) => files.get(f)!.problems).filter((p) => !reported.has(`${p.file}:${p.line}`));
      for (const p of problems) reported.add(`${p.file}:${p.line}`);
      out.push({ step, records: e.records, problems });
    }
    return out;
  };

  try {
    for (;;) {
      if (await scan()) lastNew = Date.now();
      const ready = format ? wholeSteps() : [];
      if (ready.length) {
        if (!imp) {
          checkScorable(o, format!);
          imp = await Importer.open(o, cfg, source, { format: format!, files: [...files.keys()], problems: [] });
          imp.info.imported = { ...imp.info.imported!, following: true };
          writeRunInfo(imp.runDir, imp.info);
          const m = o.metrics === null ? null : (o.metrics ?? findTrainerMetrics(source));
          if (m) {
            metrics = new TrainerMetrics(m, format!);
            imp.log('info', `following the trainer's metrics in ${m}`);
          }
          imp.log(
            'info',
            `following ${source} (${format}); a step is imported once a later one appears or its files have not changed for ${settleMs / 1000} s`,
          );
          for (const m of changes.splice(0)) imp.log('warn', m);
        }
        try {
          for (const s of ready) {
            await imp.addRecords(s.records, s.problems);
            imported.add(s.step);
            // its carried records are in the run now
            for (let i = carried.length - 1; i >= 0; i--) if (carried[i].step === s.step) carried.splice(i, 1);
            importedCounts.set(s.step, s.records.length);
            o.onStep?.(s.step, (Date.now() - wholeSince.get(s.step)!) / 1000);
          }
        } catch (e) {
          // stopped while a step was scored: that step is not written, the ones before it are whole
          if (e instanceof StoppedError) break;
          throw e;
        }
        lastNew = Date.now();
      }
      if (imp && metrics) {
        const rows = metrics.read();
        if (rows.length) {
          imp.addMetrics(rows);
          lastNew = Date.now();
        }
      }
      if (o.signal?.aborted) break;
      if (o.untilIdle !== undefined && Date.now() - lastNew >= o.untilIdle * 1000) break;
      await sleep(pollMs, o.signal);
      if (o.signal?.aborted) break;
    }
    if (!imp) {
      throw new UserError(
        o.signal?.aborted
          ? `import --follow: stopped before any whole step arrived in ${source}; nothing was imported`
          : `import --follow: no whole step arrived in ${source} within ${o.untilIdle} s; nothing was imported`,
      );
    }
    // rows still waiting when the follow ends are skipped, as a plain import skips them
    for (const st of files.values()) imp.problems.push(...st.pending.map(({ pending: _, ...p }) => p));
    imp.info.imported = { ...imp.info.imported!, following: false };
    return imp.complete();
  } catch (e) {
    imp?.fail(e);
    throw e;
  } finally {
    await imp?.close();
  }
}
