// `credit-lens results`: keep the parts of runs a comparison reads, and rebuild a results document's tables from them
// (analysis/results_book.ts says why). The book's compare arguments are the CLI's, with `*` in a path's last part
// expanded as a shell would, relative to the book's folder.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { UserError } from '../core/errors';
import { expandPattern, keepRun, readBook, staleTables, writeTables, type Book } from '../analysis/results_book';
import { parseArgs } from './args';
import { compareOutput } from './run_commands';
import { pooledProbeReport } from './data_commands';
import { pooledProbeMarkdown } from '../probe/pooled';

/** Every table of the book, id → the markdown `compare` prints (paths as seen from the working directory). */
export async function renderBook(book: Book, usage = ''): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const t of book.tables) {
    // compare's plain words may be values (--split validation); analyze's are all run folders
    const argv = (t.compare ?? t.analyze!).flatMap((arg) =>
      arg.startsWith('--') || (t.compare && !/[/*]/.test(arg))
        ? [arg]
        : expandPattern(book.root, arg).map((p) => relative(process.cwd(), join(book.root, p)) || '.'),
    );
    out.set(t.id, t.compare ? await compareOutput(argv, usage) : pooledProbeMarkdown(pooledProbeReport(argv.filter((a) => !a.startsWith('--')))).trimEnd());
  }
  return out;
}

export async function cmdResults(argv: string[], usage: string): Promise<number> {
  const a = parseArgs(argv, { valued: ['into'], boolean: ['check', 'write'] }, usage);
  if (a.positional[0] === 'keep') {
    const into = a.flags.get('into')?.[0];
    if (!into) throw new UserError('results keep: --into <folder> is required (the committed folder the runs go to)', usage);
    const dirs = a.positional.slice(1);
    if (!dirs.length) throw new UserError('results keep: name the run folders to keep', usage);
    for (const d of dirs) console.log(keepRun(d, into));
    return 0;
  }
  const bookPath = a.positional[0];
  if (!bookPath) throw new UserError('results: name the book (results/tables.yaml)', usage);
  const book = readBook(bookPath);
  const tables = await renderBook(book, usage);
  const docPath = resolve(book.root, book.doc);
  const doc = readFileSync(docPath, 'utf8');
  if (a.flags.has('write')) {
    writeFileSync(docPath, writeTables(doc, tables));
    console.log(`results: wrote ${tables.size} table${tables.size === 1 ? '' : 's'} into ${book.doc}`);
    return 0;
  }
  if (a.flags.has('check')) {
    const stale = staleTables(doc, tables);
    if (stale.length) {
      console.error(`results: ${book.doc} differs from the committed data in ${stale.join(', ')}; \`npm run results -- --write\` rebuilds them`);
      return 1;
    }
    console.log(
      `results: ${tables.size === 1 ? 'the table' : `all ${tables.size} tables`} of ${book.doc} ${tables.size === 1 ? 'is' : 'are'} what the committed data give`,
    );
    return 0;
  }
  for (const [id, md] of tables) console.log(`<!-- results: ${id} -->\n${md}\n<!-- /results -->\n`);
  return 0;
}
