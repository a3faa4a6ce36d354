// Real-VS-Code suite (DESIGN §8): the packaged .vsix (`npm run package`) installed into code-server, driven
// through Chromium as a person would — the command palette, CodeLenses, the Runs tree, notifications, modal
// dialogs, the sweep webview. Each scenario leaves screenshots in test-artifacts/e2e/ (FAIL-*.png when one fails).
// Run: bash test/e2e/install.sh && npm run test:e2e   (E2E_SKIP_PACKAGE=1 reuses an existing credit-lens.vsix)
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ART = join(ROOT, 'test-artifacts/e2e');
const CODE_SERVER = join(ROOT, '.code-server/node_modules/.bin/code-server');
const VSIX = process.env.CREDIT_LENS_VSIX ?? join(ROOT, 'credit-lens.vsix');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const log = (m) => process.stderr.write(`[e2e ${elapsed()}] ${m}\n`);

mkdirSync(ART, { recursive: true });
for (const f of readdirSync(ART)) if (f.startsWith('FAIL-')) rmSync(join(ART, f));
const TMP = mkdtempSync(join(tmpdir(), 'credit-lens-e2e-'));
const WS = join(TMP, 'workspace');

// ---- code-server -------------------------------------------------------------------------------------

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'];

/** One code-server with its own user-data dir and the .vsix installed; `trusted: false` keeps Workspace Trust on. */
async function startVsCode(name, { trusted }) {
  const userData = join(TMP, `${name}-user`);
  const extDir = join(TMP, `${name}-ext`);
  mkdirSync(join(userData, 'User'), { recursive: true });
  writeFileSync(join(userData, 'User/settings.json'), JSON.stringify({
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'update.mode': 'none',
    'chat.commandCenter.enabled': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'security.workspace.trust.enabled': !trusted ? true : false,
    'security.workspace.trust.startupPrompt': 'never',
    'security.workspace.trust.banner': 'always',
    'files.watcherExclude': { '**/runs/**/tokens/**': true, '**/runs/**/episodes/**': true },
  }, null, 2));
  const inst = spawnSync(CODE_SERVER, ['--extensions-dir', extDir, '--user-data-dir', userData, '--install-extension', VSIX], { encoding: 'utf8' });
  assert.equal(inst.status, 0, `installing ${VSIX} failed:\n${inst.stdout}\n${inst.stderr}`);
  assert.match(inst.stdout, /credit-lens/i, inst.stdout);

  const port = await freePort();
  const args = ['--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
    '--disable-getting-started-override', '--extensions-dir', extDir, '--user-data-dir', userData];
  if (trusted) args.push('--disable-workspace-trust');
  const proc = spawn(CODE_SERVER, [...args, WS], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const out = [];
  proc.stdout.on('data', (d) => out.push(String(d)));
  proc.stderr.on('data', (d) => out.push(String(d)));
  const url = `http://127.0.0.1:${port}/?folder=${encodeURIComponent(WS)}`;
  for (let i = 0; ; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (i > 300 || proc.exitCode !== null) throw new Error(`code-server did not start:\n${out.join('')}`);
    await sleep(100);
  }

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  const consoleLines = [];
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  await page.goto(url);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  // The status bar appears once the workbench has restored its parts.
  await page.locator('.statusbar').waitFor({ timeout: 60_000 });
  log(`${name}: code-server on :${port} ready`);
  return {
    page,
    async stop() {
      writeFileSync(join(ART, `${name}-browser-console.log`), consoleLines.join('\n'));
      await browser.close().catch(() => {});
      // SIGTERM to code-server itself shuts it down as a user quitting would: extensions are deactivated.
      // Its main process exits before the extension host has finished deactivating, so wait for the whole
      // process group to go, and kill what is left only after a grace period.
      try {
        process.kill(proc.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      const groupAlive = () => {
        try {
          process.kill(-proc.pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      for (let i = 0; i < 150 && groupAlive(); i++) await sleep(100);
      if (groupAlive()) process.kill(-proc.pid, 'SIGKILL');
      writeFileSync(join(ART, `${name}-code-server.log`), out.join(''));
    },
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- acting as a person ------------------------------------------------------------------------------

/** F1, type, pick. Retried: a view taking focus (▶ Run focuses the Runs view) closes an open palette. */
async function palette(page, text, { pick } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.keyboard.press('F1');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ timeout: 5_000 });
      await input.fill(`>${text}`, { timeout: 5_000 });
      const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: pick ?? text }).first();
      await row.waitFor({ timeout: 15_000 });
      await row.click({ timeout: 5_000 });
      return;
    } catch (e) {
      if (attempt >= 3) throw e;
      await page.keyboard.press('Escape');
    }
  }
}

/** Ctrl+P, type the file name, click it; retried, since the list can still be filling when first read. */
async function openFile(page, name) {
  const tab = page.locator(`.tab.active[aria-label^="${name}"]`);
  for (let attempt = 1; ; attempt++) {
    try {
      await page.keyboard.press('Control+P');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ timeout: 5_000 });
      await input.fill(name, { timeout: 5_000 });
      const row = page.locator(`.quick-input-widget .monaco-list-row[aria-label^="${name}"]`).first();
      await row.click({ timeout: 10_000 });
      await tab.waitFor({ timeout: 5_000 });
      return;
    } catch (e) {
      if (attempt >= 3) throw e;
      await page.keyboard.press('Escape');
    }
  }
}

function codeLens(page, title) {
  return page.locator('.codelens-decoration a', { hasText: title }).first();
}

/**
 * The Credit Lens side bar. Through the palette rather than the activity-bar icon: clicking the icon of a
 * container that is already showing (▶ Run focuses it) would close it.
 */
async function showRunsView(page) {
  const title = page.locator('.part.sidebar .title-label', { hasText: /credit lens/i });
  if (!(await title.waitFor({ timeout: 3_000 }).then(() => true, () => false))) {
    await palette(page, 'Credit Lens: Focus on Runs View', { pick: 'Focus on Runs View' });
    await title.waitFor({ timeout: 15_000 });
  }
  await widenSidebar(page);
}

/** Drag the side bar's sash so run descriptions (status · step/total · reward · eval) are not cut off. */
async function widenSidebar(page, width = 600) {
  const box = await page.locator('.part.sidebar').boundingBox();
  if (!box || box.width >= width - 20) return;
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width, y);
  await page.mouse.down();
  await page.mouse.move(box.x + width, y, { steps: 8 });
  await page.mouse.up();
}

async function waitForRow(page, re, timeout = 120_000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const labels = await page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? ''));
    const hit = labels.find((l) => (typeof re === 'function' ? re(l) : re.test(l)));
    if (hit) return hit;
    await sleep(150);
  }
  const labels = await page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? ''));
  throw new Error(`no Runs tree row matched ${re} within ${timeout / 1000}s; rows: ${JSON.stringify(labels)}`);
}

async function notification(page, re, timeout = 30_000) {
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: re }).first();
  await toast.waitFor({ timeout });
  return toast;
}

/** The status bar's problems item, e.g. "No Problems" or "Errors: 1, Warnings: 0". */
function problemCount(page) {
  return page.locator('[id="status.problems"]').evaluate((e) => e.querySelector('[aria-label]')?.getAttribute('aria-label') ?? e.getAttribute('aria-label'));
}

async function shot(page, name) {
  await page.screenshot({ path: join(ART, `${name}.png`) });
}

function runDirs(prefix) {
  const dir = join(WS, 'runs');
  return existsSync(dir) ? readdirSync(dir).filter((d) => d.startsWith(`${prefix}-`)).map((d) => join(dir, d)) : [];
}

const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

let failures = 0;

/** node:test with a screenshot of the moment a scenario fails. */
function scenario(name, fn) {
  test(name, async () => {
    try {
      await fn();
    } catch (e) {
      failures++;
      const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 40);
      await vs?.page.screenshot({ path: join(ART, `FAIL-${slug}.png`) }).catch(() => {});
      throw e;
    }
  });
}

// ---- the suite ---------------------------------------------------------------------------------------

let vs;

before(async () => {
  if (process.env.E2E_SKIP_PACKAGE !== '1' || !existsSync(VSIX)) {
    log('npm run package');
    const r = spawnSync('npm', ['run', 'package'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
  }
  assert.ok(existsSync(CODE_SERVER), 'code-server is not installed: run bash test/e2e/install.sh');
  cpSync(join(ROOT, 'test/e2e/workspace'), WS, { recursive: true });
  vs = await startVsCode('trusted', { trusted: true });
});

after(async () => {
  await vs?.stop();
  if (failures) {
    log(`${failures} scenario(s) failed; workspace, runs and user data left in ${TMP}`);
  } else {
    rmSync(TMP, { recursive: true, force: true });
    log('done');
  }
});

scenario('▶ Run on a config: the Runs tree shows it running, then completed, and the run directory exists', async () => {
  const { page } = vs;
  await openFile(page, 'tiny.credit.yaml');
  await codeLens(page, '▶ Run').waitFor({ timeout: 60_000 });
  await shot(page, '01-codelens');
  await codeLens(page, '▶ Run').click();
  await showRunsView(page);
  const running = await waitForRow(page, /^tiny-\d{8}-\d{6}, running\b/, 60_000);
  log(`tree: ${running}`);
  await shot(page, '02-run-running');
  const done = await waitForRow(page, /^tiny-\d{8}-\d{6}.*\bcompleted\b.*12\/12/, 180_000);
  log(`tree: ${done}`);
  // Its children are the logged steps, and a step's children its episodes, best reward first.
  await page.locator('.sidebar .pane-body .monaco-list-row', { hasText: /^tiny-\d{8}/ }).first().click();
  await waitForRow(page, /^step 12\b/, 15_000);
  await page.locator('.sidebar .pane-body .monaco-list-row', { hasText: /^step 12/ }).first().click();
  await waitForRow(page, /^-?\d+\.\d\d [✓✗] #\d+/, 15_000);
  const rewards = (await page.locator('.sidebar .pane-body .monaco-list-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('aria-label') ?? '')))
    .map((l) => /^(-?\d+\.\d\d) [✓✗] #\d+/.exec(l)?.[1]).filter(Boolean).map(Number);
  assert.equal(rewards.length, 8, 'prompts_per_step 2 × group_size 4 episodes');
  assert.ok(new Set(rewards).size > 1, `rewards differ, so their order means something: ${rewards}`);
  assert.deepEqual(rewards, [...rewards].sort((a, b) => b - a));
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

scenario('New Experiment scaffolds a valid config from a bundled example', async () => {
  const { page } = vs;
  const problemsBefore = await problemCount(page);
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
  await sleep(1000);
  assert.equal(await problemCount(page), problemsBefore, 'the new config adds no problem');
});

scenario('Stop mid-run leaves status stopped, and Resume continues from the checkpoint', async () => {
  const { page } = vs;
  await openFile(page, 'long.credit.yaml');
  await codeLens(page, '▶ Run').click();
  await showRunsView(page);
  await waitForRow(page, /^long-\d{8}-\d{6}.*running · ([3-9]|\d\d+)\/400/, 120_000);
  // While it trains, the config's CodeLens offers to stop it.
  await codeLens(page, '■ Stop').click({ timeout: 30_000 });
  const stopped = await waitForRow(page, /^long-\d{8}-\d{6}.*\bstopped\b/, 120_000);
  log(`tree: ${stopped}`);
  await shot(page, '05-stopped');
  const [dir] = runDirs('long');
  const before = readJson(join(dir, 'run.json'));
  assert.equal(before.status, 'stopped');
  const stoppedAt = before.last_step;
  assert.ok(stoppedAt >= 3, `stopped after step 3 or later (${stoppedAt})`);

  await palette(page, 'Credit Lens: Resume Run');
  const pick = page.locator('.quick-input-widget .monaco-list-row', { hasText: /^long-/ }).first();
  await pick.waitFor({ timeout: 15_000 });
  await pick.click();
  // Continuing, not restarting: the tree shows a step past the one it stopped at.
  const stepOf = (l) => Number(/^long-\d{8}-\d{6}.*running · (\d+)\/400/.exec(l)?.[1] ?? -1);
  const resumed = await waitForRow(page, (l) => stepOf(l) > stoppedAt, 120_000);
  log(`tree after resume: ${resumed}`);
  await shot(page, '06-resumed');
  const after = readJson(join(dir, 'run.json'));
  assert.equal(after.status, 'running');
  assert.match(after.resumed_from ?? '', /checkpoints[\\/]step-0*\d+/, 'run.json names the checkpoint it resumed from');
  // The engine is still appending: a last line caught mid-write is skipped.
  const steps = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').split('\n').flatMap((l) => {
    try {
      return [JSON.parse(l)];
    } catch {
      return [];
    }
  }).filter((r) => r.phase === 'grpo').map((r) => r.step);
  // Each step once, in order, with no restart from 1 after the stop.
  assert.deepEqual(steps, Array.from({ length: steps.length }, (_, i) => i + 1));
  assert.ok(steps.length > stoppedAt, `metrics continue past step ${stoppedAt}: ${steps.length} steps`);
  // 400 steps would take minutes: stop it again.
  await palette(page, 'Credit Lens: Stop Run');
  await waitForRow(page, /^long-\d{8}-\d{6}.*\bstopped\b/, 120_000);
});

scenario('Sweep on a config without a grid asks for strategies and values, shows the run count, and cancels as a whole', async () => {
  const { page } = vs;
  await openFile(page, 'tiny.credit.yaml');
  await codeLens(page, 'Sweep').click();
  const quick = page.locator('.quick-input-widget');
  await quick.locator('.quick-input-title', { hasText: 'strategies to compare' }).waitFor({ timeout: 15_000 });
  // "none" (the config's strategy, the baseline) comes checked; add outcome_conditional.
  await quick.locator('.monaco-list-row', { hasText: /^outcome_conditional/ }).click();
  await shot(page, '07-sweep-strategies');
  await page.keyboard.press('Enter');
  await quick.locator('.quick-input-title', { hasText: 'credit.think_discount' }).waitFor({ timeout: 15_000 });
  // Seed 001's three think_discounts come checked; drop 0.75.
  await quick.locator('.monaco-list-row', { hasText: /^0\.75/ }).click();
  await page.keyboard.press('Enter');
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
  assert.ok(ended.every((st) => ['completed', 'stopped', 'cancelled'].includes(st)), `${ended}`);
  assert.ok(ended.includes('cancelled'), 'queued runs were cancelled');
  assert.ok(ended.filter((st) => st === 'completed').length < 3);
  assert.equal(runDirs('tiny').length - tinyBefore, ended.filter((st) => st !== 'cancelled').length, 'a cancelled run has no directory');
  await frame.locator('vscode-button', { hasText: 'Cancel sweep' }).waitFor({ state: 'detached' });
});

scenario('a 2-run sweep completes; its summary table shows both rows, sorts, opens a run and survives a reload', async () => {
  const { page } = vs;
  await openFile(page, 'sweep.credit.yaml');
  // The summary table gets the whole window.
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await codeLens(page, 'Sweep').click();
  const dialog = page.locator('.monaco-dialog-box');
  await dialog.waitFor({ timeout: 30_000 });
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
  assert.deepEqual(desc, [...desc].sort((a, b) => b - a));
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g|' }).click();
  await frame.locator('vscode-table-header-cell', { hasText: 'Mean |g| ▲' }).waitFor();
  assert.deepEqual(await gradOrder(), [...desc].reverse());

  // A row opens its run: the Runs view shows it selected.
  const second = await rows.nth(1).getAttribute('data-run');
  await rows.nth(1).click();
  const selected = page.locator('.sidebar .pane-body .monaco-list-row.selected');
  await selected.filter({ hasText: new RegExp(`^${second}-\\d{8}`) }).waitFor({ timeout: 15_000 });

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
  await codeLens(page, '▶ Run').click();
  await showRunsView(page);
  await waitForRow(page, /^crash-\d{8}-\d{6}.*running · ([5-9]|\d\d+)\/400/, 120_000);
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
  const stepOf = (l) => Number(/^crash-\d{8}-\d{6}.*running · (\d+)\/400/.exec(l)?.[1] ?? -1);
  const resumed = await waitForRow(page, (l) => stepOf(l) > stoppedAt, 120_000);
  log(`tree after resume: ${resumed}`);
  assert.match(readJson(join(dir, 'run.json')).resumed_from ?? '', /step-/);
  await palette(page, 'Credit Lens: Stop Run');
  await waitForRow(page, /^crash-\d{8}-\d{6}.*\bstopped\b/, 120_000);
});

scenario('closing VS Code checkpoints and stops a training run', async () => {
  const { page } = vs;
  const before = new Set(runDirs('long'));
  await openFile(page, 'long.credit.yaml');
  await codeLens(page, '▶ Run').click();
  await showRunsView(page);
  await waitForRow(page, (l) => /^long-\d{8}-\d{6}, running · ([3-9]|\d\d+)\/400/.test(l) && !before.has(join(WS, 'runs', l.split(',')[0])), 120_000);
  const dir = runDirs('long').find((d) => !before.has(d));
  const { pid } = readJson(join(dir, 'run.json'));
  await vs.stop();
  vs = undefined;
  const info = readJson(join(dir, 'run.json'));
  log(`after closing: ${info.status} at step ${info.last_step}`);
  assert.equal(info.status, 'stopped');
  assert.ok(readdirSync(join(dir, 'checkpoints')).some((c) => c === `step-${String(info.last_step).padStart(6, '0')}`), 'checkpoint of the last step');
  assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the engine process has exited');
});

scenario('in an untrusted workspace Run is refused with an explanation, and existing runs can be browsed', async () => {
  await vs?.stop();
  vs = await startVsCode('untrusted', { trusted: false });
  const { page } = vs;
  const runsBefore = readdirSync(join(WS, 'runs')).length;
  await openFile(page, 'tiny.credit.yaml');
  await codeLens(page, '▶ Run').click();
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
