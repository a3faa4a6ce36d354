// The extension's own scenarios: running, stopping, resuming, sweeping, crashes, Workspace Trust.
// Harness and how to run: harness.mjs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ROOT,
  WS,
  clickCodeLens,
  codeLens,
  finishSuite,
  log,
  notification,
  openFile,
  openSweepDialog,
  palette,
  paletteAndPick,
  prepareSuite,
  readJson,
  runDirs,
  scenario,
  settledProblemCount,
  shot,
  showRunsView,
  sleep,
  startVsCode,
  waitForRow,
  widenSidebar,
} from './harness.mjs';

let vs;

before(async () => {
  prepareSuite();
  vs = await startVsCode('trusted', { trusted: true });
});

after(finishSuite);

scenario('▶ Run on a config: the Runs tree shows it running, then completed, and the run directory exists', async () => {
  const { page } = vs;
  await openFile(page, 'tiny.credit.yaml');
  await codeLens(page, '▶ Run').waitFor({ timeout: 60_000 });
  await shot(page, '01-codelens');
  await clickCodeLens(page, '▶ Run');
  // at the side bar's default width: the row must show its status and reward there, not past the edge
  await showRunsView(page, { widen: false });
  const running = await waitForRow(page, /^tiny-\d{8}-\d{6}, running\b/, 60_000);
  log(`tree: ${running}`);
  await shot(page, '02-run-running');
  const done = await waitForRow(page, /^tiny-\d{8}-\d{6}.*\bcompleted\b.*12\/12/, 180_000);
  log(`tree: ${done}`);
  const visible = await page
    .locator('.sidebar .pane-body')
    .getByRole('treeitem', { name: /^tiny-\d{8}/ })
    .first()
    .evaluate((row) => {
      const pane = row.closest('.pane-body').getBoundingClientRect();
      const desc = row.querySelector('.label-description');
      const r = desc.getBoundingClientRect();
      // the characters of the description that lie inside the pane: a Range per character, as the eye reads them
      const text = desc.firstChild;
      let shown = '';
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(text, i);
        range.setEnd(text, i + 1);
        const c = range.getBoundingClientRect();
        if (c.right <= pane.right && c.right <= desc.parentElement.getBoundingClientRect().right) shown += text.data[i];
      }
      return { width: Math.round(pane.width), label: row.querySelector('.label-name').textContent, shown, right: r.right, paneRight: pane.right };
    });
  log(`at the default width (${visible.width} px) the row reads "${visible.label}" and "${visible.shown}"`);
  assert.equal(visible.label, 'tiny', 'the row is labelled by the run name, its date is in the description');
  assert.match(visible.shown, /^completed · reward -?\d\.\d{3}/, 'status, steps and reward visible at the default width');
  await widenSidebar(page);
  // the finished run says so, with the two views to open next
  const toast = await notification(page, /tiny completed\. Greedy eval success [\d.]+% → [\d.]+% at step 12\./, 30_000);
  for (const b of ['Open Dashboard', 'Browse Rollouts']) await toast.locator('.monaco-button', { hasText: b }).waitFor({ timeout: 5_000 });
  // Its children are the logged steps, and a step's children its episodes, best reward first.
  await page
    .locator('.sidebar .pane-body')
    .getByRole('treeitem', { name: /^tiny-\d{8}/ })
    .first()
    .click();
  await waitForRow(page, /^step 12\b/, 15_000);
  await page
    .locator('.sidebar .pane-body .monaco-list-row', { hasText: /^step 12/ })
    .first()
    .click();
  await waitForRow(page, /^-?\d+\.\d\d [✓✗] #\d+/, 15_000);
  const rewards = (await page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? '')))
    .map((l) => /^(-?\d+\.\d\d) [✓✗] #\d+/.exec(l)?.[1])
    .filter(Boolean)
    .map(Number);
  assert.equal(rewards.length, 8, 'prompts_per_step 2 × group_size 4 episodes');
  assert.ok(new Set(rewards).size > 1, `rewards differ, so their order means something: ${rewards}`);
  assert.deepEqual(
    rewards,
    [...rewards].sort((a, b) => b - a),
  );
  await shot(page, '03-run-completed');
  const dirs = runDirs('tiny');
  assert.equal(dirs.length, 1, `one run directory under runs/: ${dirs}`);
  const info = readJson(join(dirs[0], 'run.json'));
  assert.equal(info.status, 'completed');
  assert.ok(existsSync(join(dirs[0], 'metrics.jsonl')));
  assert.ok(readdirSync(join(dirs[0], 'episodes')).length > 0, 'episode tables were logged');
});

scenario('an invalid config shows a Problems entry naming the field', async () => {
  const { page } = vs;
  await openFile(page, 'invalid.credit.yaml');
  await palette(page, 'View: Focus on Problems View', { pick: 'Focus on Problems View' });
  const entry = page.locator('.markers-panel .monaco-list-row', { hasText: 'grpo.group_size' }).first();
  await entry.waitFor({ timeout: 30_000 });
  const text = await entry.innerText();
  log(`problem: ${text.replace(/\s+/g, ' ')}`);
  assert.match(text, /grpo\.group_size/);
  await shot(page, '04-problems');
  await palette(page, 'View: Hide Panel', { pick: 'Hide Panel' });
});

scenario('a config that would send the API key to a remote plain-http host, or name a non-key variable, is flagged as you type', async () => {
  const { page } = vs;
  // Valid as written: https, and a key-like variable name.
  writeFileSync(
    join(WS, 'keys.credit.yaml'),
    [
      '# e2e: edited below into a config that would leak the key',
      'name: keys',
      'output_dir: runs',
      'credit:',
      '  strategy: cal',
      '  cal:',
      '    provider: openai',
      '    model: gpt-4o-mini',
      '    api_key_env: OPENAI_API_KEY',
      '    base_url: https://api.openai.com/v1',
      '',
    ].join('\n'),
  );
  await openFile(page, 'keys.credit.yaml');
  await palette(page, 'Credit Lens: Validate Config', { pick: 'Validate Config' });
  await notification(page, /keys\.credit\.yaml is valid/);
  // As a person would: replace the URL's value, then the variable's, by typing (no save).
  const editor = page.locator('.editor-group-container.active .monaco-editor');
  await editor.locator('.view-line', { hasText: 'base_url:' }).click();
  await page.keyboard.press('End');
  await page.keyboard.press('Shift+Home');
  await page.keyboard.type('base_url: http://203.0.113.7/v1');
  await editor.locator('.view-line', { hasText: 'api_key_env:' }).click();
  await page.keyboard.press('End');
  await page.keyboard.press('Shift+Home');
  await page.keyboard.type('api_key_env: HOME');
  await palette(page, 'View: Focus on Problems View', { pick: 'Focus on Problems View' });
  const url = page.locator('.markers-panel .monaco-list-row', { hasText: 'credit.cal.base_url' }).first();
  const env = page.locator('.markers-panel .monaco-list-row', { hasText: 'credit.cal.api_key_env' }).first();
  await url.waitFor({ timeout: 30_000 });
  await env.waitFor({ timeout: 30_000 });
  const texts = [await url.innerText(), await env.innerText()].map((t) => t.replace(/\s+/g, ' '));
  log(`problems: ${texts.join(' | ')}`);
  assert.match(texts[0], /only sent over https, or over http to this machine .*203\.0\.113\.7 is neither/);
  assert.match(texts[1], /"HOME".*name of a key variable/);
  await shot(page, '05-key-problems');
  // Validate on the unsaved text shows the same problems (it opens the Problems view instead of "is valid").
  await palette(page, 'View: Hide Panel', { pick: 'Hide Panel' });
  await palette(page, 'Credit Lens: Validate Config', { pick: 'Validate Config' });
  await page.locator('.markers-panel .monaco-list-row', { hasText: 'credit.cal.base_url' }).first().waitFor({ timeout: 15_000 });
  await palette(page, 'View: Hide Panel', { pick: 'Hide Panel' });
  await palette(page, 'View: Revert File', { pick: 'Revert File' });
  await palette(page, 'View: Close All Editors', { pick: 'Close All Editors' });
});

scenario('the config editor in a fresh VS Code: a key explains itself on hover, Ctrl+Space completes a key, "did you mean" is a quick fix', async () => {
  const { page } = vs;
  // No YAML extension is installed in this code-server: the docs come from Credit Lens itself.
  writeFileSync(join(WS, 'assist.credit.yaml'), ['name: assist', 'grpo:', '  group_size: 8', '  lrr: 1.0e-4', '  '].join('\n'));
  await openFile(page, 'assist.credit.yaml');
  const editor = page.locator('.editor-group-container.active .monaco-editor');
  // The CodeLens line above line 1 arrives after the text and moves every line down: hovering before it lands points at
  // the line above the key, so wait for it first.
  await codeLens(page, '▶ Run').waitFor({ timeout: 30_000 });
  await editor.locator('.view-line span', { hasText: 'group_size' }).first().hover();
  const hover = page.locator('.monaco-hover:not(.hidden)', { hasText: 'grpo.group_size' }).first();
  await hover.waitFor({ timeout: 15_000 });
  const hoverText = (await hover.innerText()).replace(/\s+/g, ' ');
  log(`hover: ${hoverText}`);
  assert.match(hoverText, /grpo\.group_size Completions per prompt \(TRL num_generations\).* Allowed: an integer ≥ 2 Default: 8/);
  await shot(page, '06-config-hover');
  await page.mouse.move(5, 450);
  await page.keyboard.press('Escape');

  // the last line, inside grpo: Ctrl+Space lists grpo's keys with their defaults; typing narrows; Enter inserts
  await editor.locator('.view-lines').click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('clip_eps_h');
  await page.keyboard.press('Control+Space');
  const item = page.locator('.suggest-widget .monaco-list-row', { hasText: 'clip_eps_high' }).first();
  await item.waitFor({ timeout: 15_000 });
  await shot(page, '07-config-completion');
  await page.keyboard.press('Enter');
  await page.keyboard.type('0.28');
  await editor.locator('.view-line', { hasText: 'clip_eps_high: 0.28' }).waitFor({ timeout: 10_000 });

  // lrr: unknown, "did you mean `lr`?": Ctrl+. on it offers the fix, which renames the key
  await editor.locator('.view-line span', { hasText: 'lrr' }).first().click();
  await page.keyboard.press('Control+.');
  const fix = page.locator('.action-widget .monaco-list-row', { hasText: 'Change to `lr`' }).first();
  await fix.waitFor({ timeout: 15_000 });
  // the fix is the preferred one, focused: Enter applies it (the menu's pointer block takes clicks)
  await page.locator('.action-widget .monaco-list-row.focused', { hasText: 'Change to `lr`' }).waitFor({ timeout: 5_000 });
  await page.keyboard.press('Enter');
  await editor.locator('.view-line', { hasText: 'lr: 1.0e-4' }).waitFor({ timeout: 10_000 });
  await palette(page, 'Credit Lens: Validate Config', { pick: 'Validate Config' });
  await notification(page, /assist\.credit\.yaml is valid/);
  await palette(page, 'View: Revert File', { pick: 'Revert File' });
  await palette(page, 'View: Close All Editors', { pick: 'Close All Editors' });
});

scenario('New Experiment scaffolds a valid config from a bundled example', async () => {
  const { page } = vs;
  const problemsBefore = await settledProblemCount(page);
  await palette(page, 'Credit Lens: New Experiment');
  const quick = page.locator('.quick-input-widget');
  await quick.locator('.monaco-list-row', { hasText: /^countdown-tiny/ }).click({ timeout: 15_000 });
  const input = quick.locator('.quick-input-box input');
  await quick.locator('.quick-input-title', { hasText: 'experiment name' }).waitFor({ timeout: 15_000 });
  await input.fill('my-first');
  await page.keyboard.press('Enter');
  await page.locator('.tab.active[aria-label^="my-first.credit.yaml"]').waitFor({ timeout: 15_000 });
  await codeLens(page, '▶ Run').waitFor({ timeout: 30_000 });
  await shot(page, '04b-new-experiment');
  const text = readFileSync(join(WS, 'my-first.credit.yaml'), 'utf8');
  assert.match(text, /^name: my-first$/m);
  assert.match(text, /^#/, "the example's comments are kept");
  // Valid as scaffolded: the status bar's problem count does not change.
  assert.equal(await settledProblemCount(page), problemsBefore, 'the new config adds no problem');
});

scenario('engine: trl from the CodeLens: ▶ Run trains with TRL through credit_lens; the tree, the toast and the run show it', async () => {
  const { page } = vs;
  // the model: a tiny random Qwen2 folder, written by the Python package the run trains with
  const made = spawnSync(process.env.CREDIT_LENS_PYTHON ?? 'python3', ['-m', 'credit_lens.testing', '--tiny-hf', join(WS, 'models/tiny-qwen2')], {
    encoding: 'utf8',
  });
  assert.equal(made.status, 0, `python -m credit_lens.testing --tiny-hf failed (pip install -e "python[trl]"):\n${made.stderr}`);
  await openFile(page, 'trl.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  await showRunsView(page);
  const done = await waitForRow(page, /^trl-\d{8}-\d{6}.*\bcompleted\b.*4\/4/, 300_000);
  log(`tree: ${done}`);
  await notification(page, /trl completed\./, 30_000);
  // its steps and episodes in the tree, as a tfjs run's: the other runs collapsed first, so that the step and episode
  // rows read below are this run's (the tree's rows are not in visual order in the DOM)
  await page.locator('.sidebar .title-actions .action-label[aria-label^="Collapse All"]').first().click({ timeout: 10_000 });
  await sleep(300);
  await page
    .locator('.sidebar .pane-body .monaco-list-row', { hasText: /^trl\.credit\.yaml/ })
    .first()
    .locator('.monaco-tl-twistie')
    .click();
  await page
    .locator('.sidebar .pane-body')
    .getByRole('treeitem', { name: /^trl-\d{8}/ })
    .first()
    .click();
  await waitForRow(page, /^step 4\b/, 15_000);
  const labels = () => page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? ''));
  assert.equal((await labels()).filter((l) => /^step \d+\b/.test(l)).length, 4, 'the trl run alone is expanded: its four steps');
  await page
    .locator('.sidebar .pane-body .monaco-list-row', { hasText: /^step 4/ })
    .first()
    .click();
  await waitForRow(page, /^-?\d+\.\d\d [✓✗] #\d+/, 15_000);
  assert.equal((await labels()).filter((l) => /^-?\d+\.\d\d [✓✗] #\d+/.test(l)).length, 8, 'prompts_per_step 2 × group_size 4 episodes of step 4');
  await shot(page, '04c-trl-run-completed');
  const [dir] = runDirs('trl');
  const info = readJson(join(dir, 'run.json'));
  assert.equal(info.status, 'completed');
  assert.equal(info.backend, 'trl');
  const rows = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    rows.map((r) => r.step),
    [1, 2, 3, 4],
  );
  assert.ok(
    rows.every((r) => Number.isFinite(r.loss)),
    "each row has TRL's loss of its update",
  );
  assert.ok(existsSync(join(dir, 'tokens', 'step-000004.arrow')), "the step's token table");
});

scenario('Stop mid-run leaves status stopped, and Resume continues from the checkpoint', async () => {
  const { page } = vs;
  await openFile(page, 'long.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  await showRunsView(page);
  await waitForRow(page, /^long-\d{8}-\d{6}.*running(?: · (?:reward|eval) [^·]+)* · ([3-9]|\d\d+)\/400/, 120_000);
  // While it trains, the config's CodeLens offers to stop it.
  await clickCodeLens(page, '■ Stop');
  const stopped = await waitForRow(page, /^long-\d{8}-\d{6}.*\bstopped\b/, 120_000);
  log(`tree: ${stopped}`);
  await shot(page, '05-stopped');
  const [dir] = runDirs('long');
  const before = readJson(join(dir, 'run.json'));
  assert.equal(before.status, 'stopped');
  const stoppedAt = before.last_step;
  assert.ok(stoppedAt >= 3, `stopped after step 3 or later (${stoppedAt})`);

  await paletteAndPick(page, 'Credit Lens: Resume Run', /^long-/);
  // Continuing, not restarting: the tree shows a step past the one it stopped at.
  const stepOf = (l) => Number(/^long-\d{8}-\d{6}.*running(?: · (?:reward|eval) [^·]+)* · (\d+)\/400/.exec(l)?.[1] ?? -1);
  const resumed = await waitForRow(page, (l) => stepOf(l) > stoppedAt, 120_000);
  log(`tree after resume: ${resumed}`);
  await shot(page, '06-resumed');
  const after = readJson(join(dir, 'run.json'));
  assert.equal(after.status, 'running');
  assert.match(after.resumed_from ?? '', /checkpoints[\\/]step-0*\d+/, 'run.json names the checkpoint it resumed from');
  // The engine is still appending: a last line caught mid-write is skipped.
  const steps = readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    })
    .filter((r) => r.phase === 'grpo')
    .map((r) => r.step);
  // Each step once, in order, with no restart from 1 after the stop.
  assert.deepEqual(
    steps,
    Array.from({ length: steps.length }, (_, i) => i + 1),
  );
  assert.ok(steps.length > stoppedAt, `metrics continue past step ${stoppedAt}: ${steps.length} steps`);
  // 400 steps would take minutes: stop it again.
  await palette(page, 'Credit Lens: Stop Run');
  await waitForRow(page, /^long-\d{8}-\d{6}.*\bstopped\b/, 120_000);
});

scenario('Sweep on a config without a grid asks for strategies and values, shows the run count, and cancels as a whole', async () => {
  const { page } = vs;
  await openFile(page, 'tiny.credit.yaml');
  await clickCodeLens(page, 'Sweep');
  const quick = page.locator('.quick-input-widget');
  await quick.locator('.quick-input-title', { hasText: 'strategies to compare (step 1)' }).waitFor({ timeout: 15_000 });
  // Each strategy says in one line what it does, from the strategy catalog.
  const oc = quick.locator('.monaco-list-row', { hasText: /^outcome_conditional/ });
  assert.match(await oc.innerText(), /think_discount outside <answer>/);
  // "none" (the config's strategy, the baseline) comes checked; add outcome_conditional.
  await oc.click();
  await shot(page, '07-sweep-strategies');
  await page.keyboard.press('Enter');
  // The peers' losses, crossed with each strategy; the config's own loss comes checked.
  // none has no knob, outcome_conditional one, and tiny's 40 SFT steps are not shared yet: 4 steps in all.
  await quick.locator('.quick-input-title', { hasText: 'losses to train each strategy with (2/4)' }).waitFor({ timeout: 15_000 });
  for (const loss of ['CISPO', 'GSPO', 'DAPO dynamic sampling']) await quick.locator('.monaco-list-row', { hasText: loss }).first().waitFor({ timeout: 5_000 });
  await page.keyboard.press('Enter');
  await quick.locator('.quick-input-title', { hasText: 'values of credit.think_discount (3/4)' }).waitFor({ timeout: 15_000 });
  // The mitigations' three think_discounts come checked; drop 0.75.
  await quick.locator('.monaco-list-row', { hasText: /^0\.75/ }).click();
  await page.keyboard.press('Enter');
  // The warm start: shared is the first choice; keep each run's own here (the runs are named the same either way).
  await quick.locator('.quick-input-title', { hasText: 'the SFT warm start (40 steps) (4/4)' }).waitFor({ timeout: 15_000 });
  await quick.locator('.monaco-list-row', { hasText: 'Share one SFT warm start' }).waitFor({ timeout: 5_000 });
  await quick.locator('.monaco-list-row', { hasText: 'Each run trains its own warm start' }).click();
  const dialog = page.locator('.monaco-dialog-box');
  await dialog.waitFor({ timeout: 15_000 });
  const text = await dialog.innerText();
  log(`dialog: ${text.replace(/\s+/g, ' ')}`);
  // none + outcome_conditional × {0.25, 0.5} = 3 runs, named by the engine's expandSweep.
  assert.match(text, /3 runs of 12 GRPO steps/);
  for (const name of ['tiny-none', 'tiny-outcome_conditional-td0.25', 'tiny-outcome_conditional-td0.5']) assert.ok(text.includes(name), name);
  const tinyBefore = runDirs('tiny').length;
  await dialog.locator('.monaco-button', { hasText: 'Start 3 Runs' }).click();

  // Cancel the whole sweep from its table while the first run trains: it stops, the queued ones never start.
  const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  const rows = frame.locator('vscode-table-row.run-row');
  await frame.locator('vscode-table-row.run-row[data-status="running"]').first().waitFor({ timeout: 60_000 });
  await frame.locator('vscode-button', { hasText: 'Cancel sweep' }).click();
  const statuses = () => rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-status')));
  for (let i = 0; i < 150 && (await statuses()).some((st) => st === 'queued' || st === 'running'); i++) await sleep(200);
  const ended = await statuses();
  log(`after cancel: ${ended}`);
  await shot(page, '07b-sweep-cancelled');
  assert.ok(
    ended.every((st) => ['completed', 'stopped', 'cancelled'].includes(st)),
    `${ended}`,
  );
  assert.ok(ended.includes('cancelled'), 'queued runs were cancelled');
  assert.ok(ended.filter((st) => st === 'completed').length < 3);
  assert.equal(runDirs('tiny').length - tinyBefore, ended.filter((st) => st !== 'cancelled').length, 'a cancelled run has no directory');
  await frame.locator('vscode-button', { hasText: 'Cancel sweep' }).waitFor({ state: 'detached' });
});

scenario('a 2-run sweep completes; its summary table shows both rows, sorts, opens a run and survives a reload', async () => {
  const { page } = vs;
  // The summary table gets the whole window.
  const dialog = await openSweepDialog(page, 'sweep.credit.yaml', { wholeWindow: true });
  assert.match(await dialog.innerText(), /2 runs/);
  await shot(page, '08a-sweep-confirm');
  await dialog.locator('.monaco-button', { hasText: 'Start 2 Runs' }).click();
  const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  const rows = frame.locator('vscode-table-row.run-row');
  await rows.first().waitFor({ timeout: 60_000 });
  assert.equal(await rows.count(), 2);
  await shot(page, '08b-sweep-running');
  await frame.locator('vscode-table-row.run-row[data-status="completed"]').nth(1).waitFor({ timeout: 300_000 });
  const names = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')));
  log(`sweep rows: ${names}`);
  assert.equal(new Set(names).size, 2);
  // The filler ÷ reasoning column comes from `credit-lens analyze`, run by the extension once a run has ended.
  const ratioCells = () => rows.evaluateAll((rs) => rs.map((r) => r.querySelectorAll('vscode-table-cell')[8].textContent.trim()));
  for (let i = 0; i < 100 && !(await ratioCells()).every((t) => /^\d+\.\d\d$/.test(t)); i++) await sleep(200);
  await shot(page, '09-sweep-summary');
  assert.equal(runDirs('sweep').length, 2);
  const shown = Object.fromEntries((await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-run')))).map((n, i) => [n, i]));
  const cells = await ratioCells();
  for (const dir of runDirs('sweep')) {
    const a = JSON.parse(spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'analyze', dir, '--json'], { encoding: 'utf8' }).stdout);
    const expected = a.token_types.filler.mean_abs_contribution / a.token_types.reasoning.mean_abs_contribution;
    const name = readJson(join(dir, 'run.json')).name;
    assert.equal(cells[shown[name]], expected.toFixed(2), `${name}: filler ÷ reasoning |c|`);
  }

  // Sorting: a click on "Mean |g|" puts the largest first, a second click the smallest.
  const gradOrder = () => rows.evaluateAll((rs) => rs.map((r) => Number(r.querySelectorAll('vscode-table-cell')[7].textContent)));
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g|' }).click();
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g| ▼' }).waitFor();
  const desc = await gradOrder();
  assert.ok(desc.every(Number.isFinite) && desc[0] !== desc[1], `two different mean grad norms: ${desc}`);
  assert.deepEqual(
    desc,
    [...desc].sort((a, b) => b - a),
  );
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g|' }).click();
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g| ▲' }).waitFor();
  assert.deepEqual(await gradOrder(), [...desc].reverse());
  // The same from the keyboard: Enter on the focused header turns the order, Space turns it back.
  const gradHead = frame.locator('vscode-table-header-cell', { hasText: 'Mean |g|' });
  await gradHead.focus();
  await page.keyboard.press('Enter');
  await frame.locator('vscode-table-header-cell[aria-sort="descending"]', { hasText: 'Mean |g| ▼' }).waitFor({ timeout: 10_000 });
  await gradHead.focus();
  await page.keyboard.press(' ');
  await frame.locator('vscode-table-header-cell[aria-sort="ascending"]', { hasText: 'Mean |g| ▲' }).waitFor({ timeout: 10_000 });

  // A row opens its run: the Runs view shows it selected, and its dashboard opens (closed again here, so the
  // reload below restores the table alone).
  const second = await rows.nth(1).getAttribute('data-run');
  await rows.nth(1).click();
  const selected = page.locator('.sidebar .pane-body .monaco-list-row.selected');
  // the row by its accessible name, the folder's (it shows the sweep run's short name)
  await selected.and(page.getByRole('treeitem', { name: new RegExp(`^${second}-\\d{8}`) })).waitFor({ timeout: 15_000 });
  // the tab says the run's name and start time, not its folder's timestamp
  const dashboardTab = page.locator('.tab', { hasText: new RegExp(`Dashboard: ${second} \\d\\d:\\d\\d`) });
  await dashboardTab.waitFor({ timeout: 15_000 });
  await dashboardTab.locator('.codicon-close').click();
  await dashboardTab.waitFor({ state: 'detached', timeout: 10_000 });

  // After a reload the panel comes back (WebviewPanelSerializer) with its rows and its sort order.
  await palette(page, 'Developer: Reload Window', { pick: 'Reload Window' });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  const restored = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  await restored.locator('vscode-table-row.run-row[data-status="completed"]').nth(1).waitFor({ timeout: 60_000 });
  await restored.locator('vscode-table-header-cell', { hasText: 'Mean |g| ▲' }).waitFor();
});

scenario('a crashed engine leaves a failed run, its last log lines, Show Log and Resume from Checkpoint', async () => {
  const { page } = vs;
  await openFile(page, 'crash.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  await showRunsView(page);
  await waitForRow(page, /^crash-\d{8}-\d{6}.*running(?: · (?:reward|eval) [^·]+)* · ([5-9]|\d\d+)\/400/, 120_000);
  const [dir] = runDirs('crash');
  const { pid } = readJson(join(dir, 'run.json'));
  process.kill(pid, 'SIGKILL'); // what an out-of-memory kill does
  const toast = await notification(page, /run crash.*failed/);
  const text = await toast.innerText();
  log(`notification: ${text.replace(/\s+/g, ' ')}`);
  assert.match(text, /exited unexpectedly \(signal SIGKILL\)/);
  await toast.locator('.monaco-button', { hasText: 'Show Log' }).waitFor();
  await waitForRow(page, /^crash-\d{8}-\d{6}.*\bfailed\b/, 30_000);
  await sleep(500);
  await shot(page, '10-crash');
  const info = readJson(join(dir, 'run.json'));
  assert.equal(info.status, 'failed');
  assert.match(info.error, /exited unexpectedly/);
  const stoppedAt = info.last_step;

  await toast.locator('.monaco-button', { hasText: 'Resume from Checkpoint' }).click();
  const stepOf = (l) => Number(/^crash-\d{8}-\d{6}.*running(?: · (?:reward|eval) [^·]+)* · (\d+)\/400/.exec(l)?.[1] ?? -1);
  const resumed = await waitForRow(page, (l) => stepOf(l) > stoppedAt, 120_000);
  log(`tree after resume: ${resumed}`);
  assert.match(readJson(join(dir, 'run.json')).resumed_from ?? '', /step-/);
  await palette(page, 'Credit Lens: Stop Run');
  await waitForRow(page, /^crash-\d{8}-\d{6}.*\bstopped\b/, 120_000);
});

scenario('a run.json from another tool or version is listed as unreadable with the reason; the other runs still list', async () => {
  const { page } = vs;
  const { mkdirSync, writeFileSync } = await import('node:fs');
  const dir = join(WS, 'runs', 'alien-20260101-000000');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'run.json'), JSON.stringify({ id: 'alien', name: 'alien', status: 'paused', started: 1767225600 }));
  await showRunsView(page);
  const row = await waitForRow(page, /^alien-20260101-000000, unreadable \(status: got "paused"/, 60_000);
  log(`tree: ${row}`);
  await waitForRow(page, /^tiny-\d{8}-\d{6}, completed/, 30_000);
  await shot(page, '20-unreadable-run');
});

scenario('closing VS Code checkpoints and stops a training run', async () => {
  const { page } = vs;
  const before = new Set(runDirs('long'));
  await openFile(page, 'long.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  await showRunsView(page);
  await waitForRow(
    page,
    (l) => /^long-\d{8}-\d{6}, running(?: · (?:reward|eval) [^·]+)* · ([3-9]|\d\d+)\/400/.test(l) && !before.has(join(WS, 'runs', l.split(',')[0])),
    120_000,
  );
  const dir = runDirs('long').find((d) => !before.has(d));
  const { pid } = readJson(join(dir, 'run.json'));
  await vs.stop();
  vs = undefined;
  // The engine is asked to stop and finishes its checkpoint on its own, detached, if the host exits first.
  let info = readJson(join(dir, 'run.json'));
  for (let i = 0; i < 600 && info.status === 'running'; i++) {
    await sleep(100);
    info = readJson(join(dir, 'run.json'));
  }
  log(`after closing: ${info.status} at step ${info.last_step}`);
  assert.equal(info.status, 'stopped');
  assert.ok(
    readdirSync(join(dir, 'checkpoints')).some((c) => c === `step-${String(info.last_step).padStart(6, '0')}`),
    'checkpoint of the last step',
  );
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  for (let i = 0; i < 100 && alive(); i++) await sleep(100);
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the engine process has exited');
});

scenario('in an untrusted workspace Run is refused with an explanation, and existing runs can be browsed', async () => {
  await vs?.stop();
  vs = await startVsCode('untrusted', { trusted: false });
  const { page } = vs;
  const runsBefore = readdirSync(join(WS, 'runs')).length;
  await openFile(page, 'tiny.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  const toast = await notification(page, /untrusted workspace/);
  const text = await toast.innerText();
  log(`notification: ${text.replace(/\s+/g, ' ')}`);
  assert.match(text, /reward module/);
  await sleep(500); // the toast fades in
  await shot(page, '11-untrusted-refused');
  await showRunsView(page);
  await waitForRow(page, /^tiny-\d{8}-\d{6}.*\bcompleted\b/, 30_000);
  await shot(page, '12-untrusted-browse');
  await sleep(1000);
  assert.equal(readdirSync(join(WS, 'runs')).length, runsBefore, 'no new run was started');
});
