// Importing another trainer's rollouts in real VS Code: "Credit Lens: Import Rollouts…" from the command
// palette, the file picker (code-server's simple dialog: type the path), the model picker (a run of the workspace),
// the progress notification, then "Open Episode" on the imported run and a painted heatmap with its hover. A
// prime-rl token export is imported with no model and painted by its own importance ratio. Harness: harness.mjs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tsImport } from 'tsx/esm/api';
import {
  ROOT,
  TMP,
  WS,
  finishSuite,
  log,
  notification,
  palette,
  paletteAndPick,
  prepareSuite,
  readJson,
  scenario,
  shot,
  showRunsView,
  sleep,
  startVsCode,
  waitForRow,
} from './harness.mjs';

let vs;
let modelRun;
let tables;
const ACTIVE = '.editor-group-container.active .monaco-editor';

function paintedColours(page) {
  return page.locator(ACTIVE).evaluate((ed) => [...ed.querySelectorAll('.view-overlays [class*="ced-"]')].map((e) => getComputedStyle(e).backgroundColor));
}

/** Import Rollouts… → type `path` into the file dialog → pick the model row matching `model`. */
async function importVia(page, path, model) {
  await palette(page, 'Credit Lens: Import Rollouts', { pick: 'Import Rollouts' });
  await pickPath(page, path, { dialogTitle: 'a veRL, TRL, prime-rl or JSONL', button: 'Import', next: model });
}

/** Follow a Training Run… → type `path` into the folder dialog → pick the trainer row matching `format`. */
/**
 * Follow a Training Run… on a workspace folder a trainer already writes to: the command lists it, and one click on
 * it goes on to the format (where a folder dialog's first click would open the folder instead).
 */
async function followVia(page, path, format) {
  for (let i = 0; i < 100 && !readdirSync(path).length; i++) await sleep(100);
  await palette(page, 'Credit Lens: Follow a Training Run', { pick: 'Follow a Training Run' });
  const folderRow = page.locator('.quick-input-widget .monaco-list-row', { hasText: relative(WS, path) }).first();
  await folderRow.waitFor({ timeout: 15_000 });
  assert.match((await folderRow.innerText()).replace(/\s+/g, ' '), new RegExp(`${relative(WS, path)}\\s*${format}`), 'listed with its detected format');
  await folderRow.click();
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: format }).first();
  await page.locator('.quick-input-widget .quick-input-title', { hasText: 'what writes this folder?' }).waitFor({ timeout: 15_000 });
  await row.click();
}

/** In code-server's simple file dialog, `path` typed and accepted; then the row matching `next` in the quick pick after it. */
async function pickPath(page, path, { dialogTitle, button, next }) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ timeout: 15_000 });
  // The simple dialog completes a typed folder into "<path>/" and lists its files; the button then accepts the folder
  // itself (Enter would open it). Click only once the box holds the path: a click before the dialog took the typed
  // value accepts the folder it was showing (the workspace).
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: next }).first();
  const holdsPath = async () => (await input.inputValue().catch(() => '')).replace(/\/+$/, '') === path;
  const dialog = page.locator('.quick-input-widget .quick-input-title', { hasText: dialogTitle });
  for (let i = 0; i < 20 && !(await row.isVisible()); i++) {
    if (await dialog.isVisible()) {
      if (!(await holdsPath())) {
        await input.fill(path);
        for (let k = 0; k < 20 && !(await holdsPath()); k++) await sleep(100);
      } else {
        await page
          .locator('.quick-input-widget .monaco-button', { hasText: button })
          .first()
          .click()
          .catch(() => {});
      }
    }
    await sleep(500);
  }
  await row.waitFor({ timeout: 30_000 });
  await row.click();
}

/** The run folders whose name starts with `prefix` under the workspace's runs/. */
const runsNamed = (prefix) =>
  readdirSync(join(WS, 'runs'))
    .filter((d) => d.startsWith(prefix))
    .map((d) => join(WS, 'runs', d));

before(async () => {
  prepareSuite();
  const args = [
    join(ROOT, 'dist/engine/cli.js'),
    'train',
    join(WS, 'tiny.credit.yaml'),
    '--set',
    'name=scorer',
    '--set',
    'sft.steps=200',
    '--set',
    'grpo.steps=2',
    '--set',
    'grpo.max_new_tokens=40',
    '--set',
    'model.max_seq_len=64',
  ];
  const r = spawnSync(process.execPath, args, { cwd: WS, encoding: 'utf8' });
  assert.equal(r.status, 0, `training failed:\n${r.stderr}`);
  modelRun = runsNamed('scorer-')[0];

  // A veRL rollout dump (trainer.rollout_data_dir): <step>.jsonl with input, output, score, step; the completions of
  // the trained run's last step, so the scorer reads them as text it can have written. One line is malformed.
  tables = await tsImport(pathToFileURL(join(ROOT, 'src/engine/rundir/arrow_tables.ts')).href, import.meta.url);
  const ep = tables.readEpisodeTable(join(modelRun, 'episodes', 'step-000002.arrow'));
  const dump = join(WS, 'verl_rollouts');
  mkdirSync(dump, { recursive: true });
  const lines = ep.prompt.map((p, i) => JSON.stringify({ input: p, output: ep.completion[i], gts: '', score: ep.reward[i], step: 12 }));
  lines.splice(2, 0, '{"input": "truncated by a crash');
  writeFileSync(join(dump, '12.jsonl'), lines.join('\n') + '\n');

  // A prime-rl token export (trainer.enable_token_export) over the tiny model's own ids: no model needed.
  const exportDir = join(WS, 'prime', 'token_exports', 'step_3');
  mkdirSync(exportDir, { recursive: true });
  const seqs = [];
  for (let s = 0; s < 4; s++) {
    const prompt = [1, 20, 21, 22];
    const comp = Array.from({ length: 24 }, (_, t) => 5 + ((t * 7 + s * 3) % 30));
    const n = prompt.length + comp.length;
    const on = (f, fill) => [...prompt.map(() => fill), ...comp.map(f)];
    seqs.push(
      JSON.stringify({
        schema_version: 2,
        step: 3,
        export_step: 3,
        rank: 0,
        token_ids: [...prompt, ...comp],
        position_ids: Array.from({ length: n }, (_, i) => i),
        loss_mask: on(() => true, false),
        advantages: on(() => (s % 2 ? -0.7 : 0.7), 0),
        rewards: on(() => (s % 2 ? 0 : 1), null),
        trainer_logprobs: on((_, t) => -0.1 - ((t * 13 + s) % 9) / 4, 0),
        inference_logprobs: on((_, t) => -0.12 - ((t * 13 + s) % 9) / 4, 0),
        entropy: on((_, t) => ((t * 5 + s) % 11) / 5, 0),
        importance_ratio: on((_, t) => 0.8 + ((t * 5 + s) % 9) / 20, null),
        mismatch_kl: on((_, t) => ((t + s) % 5) / 1000, null),
      }),
    );
  }
  writeFileSync(join(exportDir, 'rank_0.jsonl'), seqs.join('\n') + '\n');
  vs = await startVsCode('import', { trusted: true, settings: { 'workbench.colorTheme': 'Default Dark Modern' } });
  vs.page.setDefaultTimeout(30_000);
});

after(finishSuite);

scenario('Import Rollouts… on a veRL dump scored by a workspace run: progress, a run marked imported, a painted episode', async () => {
  const { page } = vs;
  await importVia(page, join(WS, 'verl_rollouts'), /scorer-\d{8}/);
  const toast = await notification(page, /imported \d+ verl completions in 1 step; 1 malformed line skipped/, 120_000);
  const runDir = runsNamed('import-verl_rollouts-')[0];
  assert.ok(runDir, 'an imported run folder');
  const info = readJson(join(runDir, 'run.json'));
  log(`run.json imported: ${JSON.stringify(info.imported)}`);
  assert.equal(info.status, 'completed');
  assert.equal(info.imported.format, 'verl');
  assert.equal(info.imported.skipped, 1);
  assert.match(info.imported.model, /scorer-\d{8}-\d{6}[/\\]checkpoints[/\\]step-\d+$/);
  await shot(page, '60-import-done');

  await toast.locator('.monaco-button', { hasText: 'Open Episode' }).click();
  // One step: the picker goes straight to the episodes, best reward first. Which episodes carry credit depends on the
  // scorer run's trajectory (a group whose rewards tie has advantage 0 and paints one shade), so pick, by its #number,
  // an episode whose advantage is not 0.
  const eps = tables.readEpisodeTable(join(runDir, 'episodes', 'step-000012.arrow'));
  const withCredit = Array.from(eps.advantage).findIndex((a) => a !== 0);
  assert.ok(withCredit >= 0, `some imported episode has a nonzero advantage: ${Array.from(eps.advantage).join(', ')}`);
  const episode = eps.episode[withCredit];
  const first = page.locator('.quick-input-widget .monaco-list-row').first();
  await first.waitFor({ timeout: 15_000 });
  await page.locator('.quick-input-widget input').fill(`#${episode}`);
  await page
    .locator('.quick-input-widget .monaco-list-row', { hasText: `#${episode}` })
    .first()
    .click();
  await page.locator(`.tab.active[aria-label*="step 12 · episode ${episode}"]`).waitFor({ timeout: 15_000 });
  // painted by Â by default, one shade under strategy none: the contribution c_Â varies with each token's log-prob
  await paletteAndPick(page, 'Credit Lens: Heatmap: Choose Metric', /^contribution/, { pick: 'Heatmap: Choose Metric' });
  let colours = [];
  for (let i = 0; i < 50 && new Set(colours).size < 4; i++, await sleep(200)) colours = await paintedColours(page);
  log(`imported episode: ${colours.length} painted tokens in ${new Set(colours).size} colours`);
  assert.ok(new Set(colours).size >= 4, `painted in several colours: ${[...new Set(colours)].join(', ')}`);
  const cells = page.locator(ACTIVE).locator('.view-overlays [class*="ced-"]');
  const box = await cells.nth(Math.floor(colours.length / 2)).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const hover = page.locator('.monaco-hover:not(.hidden)', { hasText: 'contribution' }).first();
  await hover.waitFor({ timeout: 15_000 });
  const text = await hover.innerText();
  for (const field of ['log-prob', 'entropy', 'advantage A', 'contribution']) assert.ok(text.includes(field), `hover shows ${field}`);
  await shot(page, '61-import-heatmap', { readme: 'import-heatmap' });
  await page.mouse.move(5, 450);
  await page.keyboard.press('Escape');
});

scenario('a prime-rl token export imports with no model and paints by its own importance ratio', async () => {
  const { page } = vs;
  await importVia(page, join(WS, 'prime', 'token_exports'), 'No model');
  const toast = await notification(page, /imported 4 prime completions in 1 step\./, 60_000);
  await toast.locator('.monaco-button', { hasText: 'Open Episode' }).click();
  const first = page.locator('.quick-input-widget .monaco-list-row').first();
  await first.waitFor({ timeout: 15_000 });
  await first.click();
  await page.locator('.tab.active[aria-label*="step 3 · episode"]').waitFor({ timeout: 15_000 });
  await paletteAndPick(page, 'Credit Lens: Heatmap: Choose Metric', /^importance ratio/, { pick: 'Heatmap: Choose Metric' });
  const item = page.locator('.statusbar [aria-label^="Heatmap metric importance ratio"]').first();
  await item.waitFor({ timeout: 15_000 });
  let colours = [];
  for (let i = 0; i < 50 && new Set(colours).size < 4; i++, await sleep(200)) colours = await paintedColours(page);
  assert.ok(new Set(colours).size >= 4, `importance ratio painted in several shades: ${[...new Set(colours)].join(', ')}`);
  await shot(page, '62-import-prime-importance-ratio', { readme: 'import-prime' });
  // Back to the default metric for whatever comes next.
  await paletteAndPick(page, 'Credit Lens: Heatmap: Choose Metric', /^contribution/, { pick: 'Heatmap: Choose Metric' });
});

/**
 * A prime-rl trainer writing its token exports as it trains: step N's 64 completions to token_exports/step_N/rank_0.jsonl
 * every 4 s, and its metrics.jsonl; the moment each step's file was written goes to `stamps` (step N is whole once
 * step N + 1's file exists).
 */
const TRAINER = `
const fs = require('fs'), path = require('path');
const [out, stamps] = process.argv.slice(1);
const times = {};
let step = 0;
const tick = () => {
  step++;
  const dir = path.join(out, 'token_exports', 'step_' + step);
  fs.mkdirSync(dir, { recursive: true });
  const lines = [];
  for (let s = 0; s < 64; s++) {
    const prompt = [1, 20, 21, 22];
    const comp = Array.from({ length: 24 + (s % 8) }, (_, t) => 5 + ((t * 7 + s * 3 + step) % 30));
    const on = (f, fill) => [...prompt.map(() => fill), ...comp.map(f)];
    // more of each step's completions are right as training goes on
    const pos = s % 10 < Math.min(9, 2 + 1.5 * step);
    const adv = (pos ? 1 : -1) * (0.3 + 0.1 * (s % 3));
    lines.push(JSON.stringify({ step, token_ids: [...prompt, ...comp], loss_mask: on(() => true, false), advantages: on(() => adv, 0),
      rewards: on(() => (adv > 0 ? 1 : 0), null), trainer_logprobs: on((_, t) => -0.1 - ((t * 13 + s + step) % 9) / 4, 0),
      entropy: on((_, t) => (((t * 5 + s) % 11) / 5) * Math.max(0.3, 1 - 0.12 * step), 0) }));
  }
  fs.writeFileSync(path.join(dir, 'rank_0.jsonl'), lines.join('\\n') + '\\n');
  fs.appendFileSync(path.join(out, 'metrics.jsonl'), JSON.stringify({ step, time: Date.now() / 1000, 'loss/mean': 0.5 / step, 'entropy/mean': 2 - 0.2 * step }) + '\\n');
  times[step] = Date.now();
  fs.writeFileSync(stamps, JSON.stringify(times));
  if (step < 30) setTimeout(tick, 4000);
};
tick();
`;

scenario('Follow a Training Run… on a growing prime-rl folder: the run reads following, its steps rise, Stop leaves a completed run', async () => {
  const { page } = vs;
  const live = join(WS, 'prime-live');
  mkdirSync(live, { recursive: true });
  const stamps = join(TMP, 'trainer-stamps.json');
  const trainer = spawn(process.execPath, ['-e', TRAINER, live, stamps], { stdio: 'ignore' });
  try {
    await followVia(page, live, 'prime-rl output folder');
    await notification(page, /following prime-live/, 30_000);
    await showRunsView(page);
    // step N is whole once the trainer writes step N + 1; the tree shows it when its row reads "N steps"
    const latencies = [];
    for (const n of [1, 2, 3]) {
      const label = await waitForRow(page, (l) => Number(/following(?: · (?:reward|eval) [^·]+)* · (\d+) steps?/.exec(l)?.[1] ?? 0) >= n, 60_000);
      const seen = Date.now();
      const times = JSON.parse(readFileSync(stamps, 'utf8'));
      if (times[n + 1]) latencies.push((seen - times[n + 1]) / 1000);
      log(`tree: ${label}`);
    }
    log(`follow latency, step whole → its row in the Runs tree: ${latencies.map((x) => x.toFixed(1)).join(', ')} s`);
    // measured, not asserted (a timing): the closing notes report it
    assert.ok(latencies.length >= 2, 'steps became whole while the view watched');
    // its hover says where it comes from and how far it has come, not a backend nor a line of dashes for evals
    const runRow = page
      .locator('.sidebar .pane-body')
      .getByRole('treeitem', { name: /^import-prime-live-/ })
      .first();
    await runRow.hover();
    const hover = page.locator('.monaco-hover:not(.hidden)', { hasText: 'following' }).first();
    await hover.waitFor({ timeout: 15_000 });
    const said = (await hover.innerText()).replace(/\s+/g, ' ');
    log(`hover: ${said}`);
    assert.match(said, /following .*prime-live \(prime\) · \d+ steps?, [\d,]+ completions · last update [^·]*\d\d:\d\d/);
    assert.doesNotMatch(said, /backend|final eval/);
    await page.mouse.move(5, 450);
    // its dashboard charts the import's reward and the trainer's own metrics, and grows with the next step
    await paletteAndPick(page, 'Credit Lens: Open Dashboard', /import-prime-live-/);
    const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
    const reward = frame.locator('section.chart[data-chart="reward"]');
    await reward.waitFor({ timeout: 30_000 });
    await frame.locator('section.chart[data-chart="prime/loss/mean"]').waitFor({ timeout: 30_000 });
    const points = async () => Number((await reward.getAttribute('data-points')) ?? 0);
    const before = await points();
    for (let i = 0; i < 60 && (await points()) <= before; i++) await sleep(250);
    log(`dashboard reward points: ${before} → ${await points()}`);
    assert.ok((await points()) > before, 'the dashboard added the next step as it was imported');
    await palette(page, 'Notifications: Clear All Notifications', { pick: 'Clear All Notifications' });
    await shot(page, '63-follow', { readme: 'follow' });

    await palette(page, 'Credit Lens: Stop Run');
    const done = await notification(page, /stopped following prime-live: \d+ steps? \(\d+ completions\) imported/, 60_000);
    const runDir = runsNamed('import-prime-live-')[0];
    const info = readJson(join(runDir, 'run.json'));
    assert.equal(info.status, 'completed');
    assert.equal(info.imported.following, false);
    const steps = readdirSync(join(runDir, 'episodes')).length;
    assert.ok(steps >= 3, `${steps} steps`);
    for (let n = 1; n <= steps; n++)
      assert.equal(tables.readEpisodeTable(join(runDir, 'episodes', `step-${String(n).padStart(6, '0')}.arrow`)).episode.length, 64);
    log(`stopped: ${await done.innerText()}`);
  } finally {
    trainer.kill();
  }
});
