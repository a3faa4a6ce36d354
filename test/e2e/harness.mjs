// Real-VS-Code suite harness (design.md#tests-in-real-vs-code): the packaged .vsix (`npm run package`) installed into code-server,
// driven through Chromium as a person would — the command palette, CodeLenses, the Runs tree, notifications,
// modal dialogs, webviews. Each `*.test.mjs` beside this file is one node:test file (its own process, its own
// workspace copy and code-server); scenarios leave screenshots in test-artifacts/e2e/ (FAIL-*.png when one fails).
// Run: bash test/e2e/install.sh && npm run test:e2e   (E2E_SKIP_PACKAGE=1 reuses an existing credit-lens.vsix)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const ART = join(ROOT, 'test-artifacts/e2e');
export const SCREENSHOTS = join(ROOT, 'media/screenshots');
const CODE_SERVER = join(ROOT, '.code-server/node_modules/.bin/code-server');
const VSIX = process.env.CREDIT_LENS_VSIX ?? join(ROOT, 'credit-lens.vsix');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const suiteName = basename(process.argv[1] ?? 'e2e').replace(/\.test\.mjs$/, '');
export const log = (m) => process.stderr.write(`[e2e ${suiteName} ${elapsed()}] ${m}\n`);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

mkdirSync(ART, { recursive: true });
export const TMP = mkdtempSync(join(tmpdir(), `credit-lens-e2e-${suiteName}-`));
export const WS = join(TMP, 'workspace');

/** The code-server instance a failing scenario screenshots. */
let active;
let failures = 0;

// ---- suite setup -------------------------------------------------------------------------------------

/**
 * Packages the .vsix once per `node --test` invocation (every test file is a child of the same runner, so the
 * runner's pid marks "already packaged"), checks code-server is installed, and copies the e2e workspace.
 */
export function prepareSuite() {
  for (const f of readdirSync(ART)) if (f.startsWith(`FAIL-${suiteName}-`)) rmSync(join(ART, f));
  const stamp = join(ART, `.packaged-by-${process.ppid}`);
  if ((process.env.E2E_SKIP_PACKAGE !== '1' || !existsSync(VSIX)) && !(existsSync(stamp) && existsSync(VSIX))) {
    log('npm run package');
    const r = spawnSync('npm', ['run', 'package'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, `npm run package failed:\n${r.stdout}\n${r.stderr}`);
    for (const f of readdirSync(ART)) if (f.startsWith('.packaged-by-')) rmSync(join(ART, f));
    writeFileSync(stamp, new Date().toISOString());
  }
  assert.ok(existsSync(CODE_SERVER), 'code-server is not installed: run bash test/e2e/install.sh');
  cpSync(join(ROOT, 'test/e2e/workspace'), WS, { recursive: true });
}

/** Leaves the temporary folder for inspection when a scenario failed, removes it otherwise. */
export async function finishSuite() {
  await active?.stop();
  if (failures) {
    log(`${failures} scenario(s) failed; workspace, runs and user data left in ${TMP}`);
  } else {
    rmSync(TMP, { recursive: true, force: true });
    log('done');
  }
}

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

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-dev-shm-usage',
];

/**
 * One code-server with its own user-data dir and the .vsix installed; `trusted: false` keeps Workspace Trust on.
 * `settings` are merged into the user settings.
 */
export async function startVsCode(name, { trusted, settings = {}, viewport = { width: 1440, height: 900 } }) {
  const userData = join(TMP, `${name}-user`);
  const extDir = join(TMP, `${name}-ext`);
  mkdirSync(join(userData, 'User'), { recursive: true });
  writeFileSync(
    join(userData, 'User/settings.json'),
    JSON.stringify(
      {
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
        ...settings,
      },
      null,
      2,
    ),
  );
  const inst = spawnSync(CODE_SERVER, ['--extensions-dir', extDir, '--user-data-dir', userData, '--install-extension', VSIX], { encoding: 'utf8' });
  assert.equal(inst.status, 0, `installing ${VSIX} failed:\n${inst.stdout}\n${inst.stderr}`);
  assert.match(inst.stdout, /credit-lens/i, inst.stdout);

  const port = await freePort();
  const args = [
    '--auth',
    'none',
    '--bind-addr',
    `127.0.0.1:${port}`,
    '--disable-telemetry',
    '--disable-update-check',
    '--disable-getting-started-override',
    '--extensions-dir',
    extDir,
    '--user-data-dir',
    userData,
  ];
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
  const page = await browser.newPage({ viewport });
  const consoleLines = [];
  page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  await page.goto(url);
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  // The status bar appears once the workbench has restored its parts.
  await page.locator('.statusbar').waitFor({ timeout: 60_000 });
  log(`${name}: code-server on :${port} ready`);
  let stopped = false;
  const instance = {
    page,
    async stop() {
      if (stopped) return;
      stopped = true;
      if (active === instance) active = undefined;
      writeFileSync(join(ART, `${suiteName}-${name}-browser-console.log`), consoleLines.join('\n'));
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
      writeFileSync(join(ART, `${suiteName}-${name}-code-server.log`), out.join(''));
    },
  };
  active = instance;
  return instance;
}

// ---- acting as a person ------------------------------------------------------------------------------

/** F1, type, pick. Retried: a view taking focus (▶ Run focuses the Runs view) closes an open palette. */
export async function palette(page, text, { pick, until } = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.keyboard.press('F1');
      const input = page.locator('.quick-input-widget .quick-input-box input');
      await input.waitFor({ timeout: 5_000 });
      await input.fill(`>${text}`, { timeout: 5_000 });
      const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: pick ?? text }).first();
      await row.waitFor({ timeout: 15_000 });
      await row.click({ timeout: 5_000 });
      // what the command does, seen: a click on a row still being filtered, or an F1 a webview kept, runs nothing
      if (until) await until();
      return;
    } catch (e) {
      if (attempt >= 3) throw e;
      await page.keyboard.press('Escape');
    }
  }
}

/**
 * A command that asks for one item in a quick pick: the palette, then the picker the command opens (its input no
 * longer the palette's `>`), `filter` typed where the list is long, and the row matching `row` clicked. The palette is
 * run again until the picker shows that row, so a command that never ran cannot leave the next step waiting on an
 * input that is not coming; the picker may take its time (a sweep's runs read on a loaded machine).
 */
export async function paletteAndPick(page, command, row, { pick, filter, timeout = 60_000 } = {}) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  const item = page.locator('.quick-input-widget .monaco-list-row', { hasText: row }).first();
  await palette(page, command, {
    pick,
    until: async () => {
      const t0 = Date.now();
      while (!((await input.isVisible()) && !(await input.inputValue()).startsWith('>'))) {
        if (Date.now() - t0 > timeout) throw new Error(`${command}: no picker within ${timeout / 1000} s`);
        await sleep(100);
      }
      if (filter) await input.fill(filter, { timeout: 5_000 });
      await item.waitFor({ timeout });
    },
  });
  await item.click({ timeout: 10_000 });
}

/** Ctrl+P, type the file name, click it; retried, since the list can still be filling when first read. */
export async function openFile(page, name) {
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

export function codeLens(page, title) {
  return page.locator('.codelens-decoration a', { hasText: title }).first();
}

/**
 * Click a CodeLens as a person would, after dismissing whatever hover is still open: a lens's own tooltip, or an
 * editor hover left by an earlier step, is a context view that sits over the lens line and takes the click.
 */
export async function clickCodeLens(page, title, { timeout = 30_000 } = {}) {
  const lens = codeLens(page, title);
  await lens.waitFor({ timeout });
  for (let attempt = 1; ; attempt++) {
    await page.mouse.move(5, 5);
    await page.keyboard.press('Escape');
    await page
      .locator('.context-view .monaco-hover, .monaco-hover:not(.hidden)')
      .first()
      .waitFor({ state: 'hidden', timeout: 2_000 })
      .catch(() => {});
    try {
      await lens.click({ timeout: 5_000 });
      return;
    } catch (e) {
      if (attempt >= 4) throw e;
    }
  }
}

/**
 * Open a config and press its Sweep CodeLens; returns the confirmation dialog once it shows. `wholeWindow` hides the
 * side bar first, so the summary that opens next gets the window.
 */
export async function openSweepDialog(page, config, { wholeWindow = false, timeout = 30_000 } = {}) {
  await openFile(page, config);
  if (wholeWindow) await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await clickCodeLens(page, 'Sweep');
  const dialog = page.locator('.monaco-dialog-box');
  await dialog.waitFor({ timeout });
  return dialog;
}

/**
 * The Credit Lens side bar. Through the palette rather than the activity-bar icon: clicking the icon of a
 * container that is already showing (▶ Run focuses it) would close it.
 */
export async function showRunsView(page, { widen = true } = {}) {
  const title = page.locator('.part.sidebar .title-label', { hasText: /credit lens/i });
  if (
    !(await title.waitFor({ timeout: 3_000 }).then(
      () => true,
      () => false,
    ))
  ) {
    await palette(page, 'Credit Lens: Focus on Runs View', { pick: 'Focus on Runs View' });
    await title.waitFor({ timeout: 15_000 });
  }
  if (widen) await widenSidebar(page);
}

/** Drag the side bar's sash so run descriptions (status · step/total · reward · eval) are not cut off. */
export async function widenSidebar(page, width = 600) {
  const box = await page.locator('.part.sidebar').boundingBox();
  if (!box || box.width >= width - 20) return;
  const y = box.y + box.height / 2;
  await page.mouse.move(box.x + box.width, y);
  await page.mouse.down();
  await page.mouse.move(box.x + width, y, { steps: 8 });
  await page.mouse.up();
}

export async function waitForRow(page, re, timeout = 120_000) {
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

export async function notification(page, re, timeout = 30_000) {
  const toast = page.locator('.notifications-toasts .notification-toast', { hasText: re }).first();
  await toast.waitFor({ timeout });
  return toast;
}

/** The status bar's problems item, e.g. "No Problems" or "Errors: 1, Warnings: 0". */
export function problemCount(page) {
  return page.locator('[id="status.problems"]').evaluate((e) => e.querySelector('[aria-label]')?.getAttribute('aria-label') ?? e.getAttribute('aria-label'));
}

/**
 * The status bar's problem count once it has stopped changing for `quietMs`. Diagnostics of an edited or closed file
 * are withdrawn asynchronously, so a count read right after an earlier scenario's Revert can still include them.
 */
export async function settledProblemCount(page, { quietMs = 2000, timeoutMs = 30_000 } = {}) {
  const end = Date.now() + timeoutMs;
  let last = await problemCount(page);
  let since = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, 250));
    const now = await problemCount(page);
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= quietMs) return now;
  }
  return last;
}

/**
 * A screenshot into test-artifacts/e2e/. `readme: 'name'` marks it as the README's media/screenshots/name.png,
 * written there only with E2E_README_SCREENSHOTS=1 so that an ordinary run leaves the tracked images alone.
 */
export async function shot(page, name, { readme } = {}) {
  const path = join(ART, `${name}.png`);
  await page.screenshot({ path });
  if (readme && process.env.E2E_README_SCREENSHOTS === '1') {
    mkdirSync(SCREENSHOTS, { recursive: true });
    cpSync(path, join(SCREENSHOTS, `${readme}.png`));
  }
}

export function runDirs(prefix) {
  const dir = join(WS, 'runs');
  return existsSync(dir)
    ? readdirSync(dir)
        .filter((d) => d.startsWith(`${prefix}-`))
        .map((d) => join(dir, d))
    : [];
}

/** node:test with a screenshot of the moment a scenario fails. */
export function scenario(name, fn) {
  test(name, async () => {
    try {
      await fn();
    } catch (e) {
      failures++;
      const slug = name.replace(/[^a-z0-9]+/gi, '-').slice(0, 40);
      await active?.page.screenshot({ path: join(ART, `FAIL-${suiteName}-${slug}.png`) }).catch(() => {});
      throw e;
    }
  });
}
