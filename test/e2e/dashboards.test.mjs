// The dashboards: the run dashboard on a finished run and live on a training one (with its update
// latency), two runs compared from the Runs tree's multi-selection with chart export, and the credit-analysis
// view with its step range, baseline comparison and restore after a reload. Harness and how to run: harness.mjs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ROOT,
  WS,
  clickCodeLens,
  finishSuite,
  log,
  openFile,
  palette,
  paletteAndPick,
  prepareSuite,
  runDirs,
  scenario,
  shot,
  showRunsView,
  sleep,
  startVsCode,
  waitForRow,
} from './harness.mjs';

let vs;
let baseline;
let attribution;

/** Trained with the CLI before VS Code starts: finished runs on disk, as a run trained elsewhere would be. */
function train(...sets) {
  const r = spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'train', join(WS, 'tiny.credit.yaml'), ...sets.flatMap((s) => ['--set', s])], {
    cwd: WS,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `credit-lens train failed:\n${r.stdout}\n${r.stderr}`);
}

before(async () => {
  prepareSuite();
  train();
  train('name=tiny-attr', 'credit.strategy=attribution', 'grpo.steps=8');
  [baseline] = runDirs('tiny').filter((d) => !d.includes('tiny-attr'));
  [attribution] = runDirs('tiny-attr');
  assert.ok(baseline && attribution, 'both runs were trained');
  vs = await startVsCode('dashboards', { trusted: true });
});

after(finishSuite);

/** The one webview on screen (every scenario closes the editors it opened first). */
const webview = (page) => page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');

async function closeEditors(page) {
  await palette(page, 'View: Close All Editors', { pick: 'Close All Editors' });
  await page
    .locator('iframe.webview')
    .first()
    .waitFor({ state: 'detached', timeout: 10_000 })
    .catch(() => {});
}

/** Per chart: the number of values drawn and whether its canvas has a painted pixel in the plotting area. */
function chartState(frame) {
  return frame.locator('section.chart').evaluateAll((cards) =>
    cards.map((c) => {
      const canvas = c.querySelector('canvas');
      let ink = false;
      if (canvas && canvas.width > 0 && canvas.height > 0) {
        const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 3; i < d.length && !ink; i += 4) ink = d[i] !== 0;
      }
      return { id: c.dataset.chart, points: Number(c.dataset.points ?? 0), ink, firstX: c.dataset.firstX ?? '', empty: c.classList.contains('is-empty') };
    }),
  );
}

async function pickRun(page, re) {
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: re }).first();
  await row.waitFor({ timeout: 60_000 });
  await row.click();
}

/** VS Code's own save dialog in the browser is a quick input holding the proposed path: accept it. */
async function acceptSaveDialog(page, expectedPath) {
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ timeout: 15_000 });
  for (let i = 0; i < 50 && !(await input.inputValue()).endsWith(expectedPath.split('/').pop()); i++) await sleep(100);
  await page.keyboard.press('Enter');
  for (let i = 0; i < 100 && !existsSync(expectedPath); i++) await sleep(100);
  assert.ok(existsSync(expectedPath), `${expectedPath} was written`);
}

scenario(
  'the dashboard of a finished run draws every chart from GRPO step 1, SFT on a toggle, KL off as an empty state, smoothing, one cursor, and a probe finished meanwhile',
  async () => {
    const { page } = vs;
    await paletteAndPick(page, 'Credit Lens: Open Dashboard', /^tiny-\d{8}/);
    const frame = webview(page);
    await frame.locator('section.chart[data-chart="reward"]').waitFor({ timeout: 30_000 });
    // The side bar away: the screenshot gets the width.
    await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
    await sleep(800);
    const charts = await chartState(frame);
    log(`charts: ${charts.map((c) => `${c.id}=${c.points}${c.ink ? '' : ' (blank)'}`).join(', ')}`);
    const ids = charts.map((c) => c.id);
    for (const id of ['reward', 'success', 'loss', 'grad_norm', 'kl', 'entropy', 'effective_groups', 'clip_frac', 'response_len', 'tokens_per_s'])
      assert.ok(ids.includes(id), `${id} chart`);
    // tiny trains with grpo.kl_beta 0 (the default): its KL chart says so instead of drawing a flat zero line.
    const kl = frame.locator('section.chart[data-chart="kl"]');
    assert.match(await kl.locator('.empty-state').innerText(), /^KL not computed: grpo\.kl_beta = 0/);
    assert.ok(
      charts.every((c) => c.empty || (c.points > 0 && c.ink)),
      'every other chart has values and painted pixels',
    );
    // By default every chart starts at GRPO step 1: the 40 SFT steps do not squeeze GRPO into a corner.
    assert.ok(
      charts.filter((c) => c.points > 0).every((c) => c.firstX === '1'),
      `first x: ${charts.map((c) => `${c.id}=${c.firstX}`).join(', ')}`,
    );
    const rows = readFileSync(join(baseline, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const grpoRows = rows.filter((r) => r.phase === 'grpo').length;
    // a clip fraction of 0 at every step (one epoch per step: on-policy) is said in words, as KL's is
    const clipped = rows.filter((r) => r.phase === 'grpo' && typeof r.clip_frac === 'number').map((r) => r.clip_frac);
    const clipCard = charts.find((c) => c.id === 'clip_frac');
    if (clipped.length && clipped.every((v) => v === 0))
      assert.match(await frame.locator('section.chart[data-chart="clip_frac"] .empty-state').innerText(), /^Nothing clipped: .*on-policy/);
    else assert.ok(!clipCard.empty, 'a clip fraction that moved is drawn');
    // The Loss chart's y axis is as wide as its widest label, so a negative loss keeps its minus sign: the plot area
    // starts right of every label, each measured in the axis font (the labels are the host's accessible name).
    assert.ok(
      rows.some((r) => r.phase === 'grpo' && r.loss < 0),
      'tiny logs a negative GRPO loss (the seeded run this check needs)',
    );
    const lossAxis = await frame.locator('section.chart[data-chart="loss"] [role="img"]').evaluate((host) => {
      const ticks = /\((.*)\)$/.exec(host.getAttribute('aria-label'))[1].split(', ');
      const cs = getComputedStyle(document.body);
      const ctx = document.createElement('canvas').getContext('2d');
      ctx.font = `${Math.max(10, parseFloat(cs.getPropertyValue('--vscode-font-size') || '13') - 2)}px ${cs.getPropertyValue('--vscode-font-family') || 'sans-serif'}`;
      return {
        label: host.getAttribute('aria-label'),
        ticks,
        left: host.querySelector('.u-over').offsetLeft,
        widest: Math.max(...ticks.map((t) => ctx.measureText(t).width)),
      };
    });
    log(`loss axis: ${lossAxis.label}; plot starts at ${lossAxis.left} px, widest label ${lossAxis.widest.toFixed(1)} px`);
    assert.ok(
      lossAxis.ticks.some((t) => /^-\d/.test(t)),
      `a negative tick: ${lossAxis.ticks}`,
    );
    assert.ok(lossAxis.left >= lossAxis.widest, 'the gutter holds the widest label');
    // The reward chart holds one point per GRPO step (the eval's greedy reward is kept off it), and so does the loss chart.
    assert.equal(charts.find((c) => c.id === 'reward').points, grpoRows);
    assert.equal(charts.find((c) => c.id === 'loss').points, grpoRows);
    // The eval before GRPO is said in words above the success chart.
    const pre = rows.find((r) => r.phase === 'eval' && r.step === 0);
    const caption = await frame.locator('section.chart[data-chart="success"] .before-grpo').innerText();
    log(`success caption: ${caption}`);
    assert.equal(caption, `before GRPO: eval ${(pre.eval_success * 100).toFixed(1)}%`);
    // One cursor: the step under the mouse on the reward chart is the step the loss chart's legend reads.
    const over = frame.locator('section.chart[data-chart="reward"] .u-over');
    const box = await over.boundingBox();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
    await sleep(300);
    const stepOf = (id) => frame.locator(`section.chart[data-chart="${id}"] .u-legend .u-series`).first().locator('.u-value').innerText();
    const [atReward, atLoss] = [await stepOf('reward'), await stepOf('loss')];
    log(`cursor: reward ${atReward}, loss ${atLoss}`);
    assert.match(atReward, /^GRPO step \d+$/);
    assert.equal(atLoss, atReward);
    await page.mouse.move(box.x + box.width / 2, box.y - 60);
    await shot(page, 'dash-01-dashboard');
    // Smoothing: the drawn reward is the debiased EMA, the CSV the logged values (unit-tested); the slider's value shows.
    await frame.locator('input.smoothing').evaluate((el) => {
      el.value = '0.6';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    await frame.locator('output.smoothing-value', { hasText: '0.60' }).waitFor({ timeout: 5_000 });
    // The warm start on demand: every SFT step, the eval before GRPO and the shading.
    await frame.locator('input.include-sft').check();
    await frame.locator('.note', { hasText: 'Shaded: the SFT warm start' }).waitFor();
    const withSft = await chartState(frame);
    assert.equal(withSft.find((c) => c.id === 'loss').points, rows.filter((r) => r.phase !== 'eval').length);
    assert.ok(Number(withSft.find((c) => c.id === 'loss').firstX) < 0);
    await shot(page, 'dash-01b-dashboard-sft-smoothed');
    await frame.locator('input.include-sft').uncheck();
    await frame.locator('input.smoothing').evaluate((el) => {
      el.value = '0';
      el.dispatchEvent(new Event('input', { bubbles: true }));
    });
    // A probe that finishes while the dashboard is open (here the CLI's, as from a terminal) adds its step at once: the
    // page is not reloaded, so the chart can only come from the probe record's stream.
    assert.ok(!(await chartState(frame)).some((c) => c.id === 'mc_lift'), 'no probe yet: no MC chart');
    const probe = spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'probe', baseline, '--step', '1', '--episodes', '8', '--rollouts', '8'], {
      cwd: WS,
      encoding: 'utf8',
    });
    assert.equal(probe.status, 0, `credit-lens probe failed:\n${probe.stdout}\n${probe.stderr}`);
    const mc = frame.locator('section.chart[data-chart="mc_lift"]');
    await mc.waitFor({ timeout: 30_000 });
    for (let i = 0; i < 50 && Number(await mc.getAttribute('data-points')) < 1; i++) await sleep(100);
    const card = (await chartState(frame)).find((c) => c.id === 'mc_lift');
    log(`after the probe: mc_lift ${card.points} points${card.ink ? '' : ' (blank)'}`);
    assert.ok(card.points >= 1 && card.ink, 'the probed step is drawn');
    await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
    await closeEditors(page);
  },
);

scenario('the dashboard of a training run adds points as run/metrics arrive', async () => {
  const { page } = vs;
  await openFile(page, 'live.credit.yaml');
  await clickCodeLens(page, '▶ Run');
  await showRunsView(page);
  await waitForRow(page, /^live-\d{8}-\d{6}.*running(?: · (?:reward|eval) [^·]+)* · ([1-9]|\d\d+)\/4000/, 120_000);
  await closeEditors(page);
  await paletteAndPick(page, 'Credit Lens: Open Dashboard', /^live-\d{8}/);
  const frame = webview(page);
  const reward = frame.locator('section.chart[data-chart="reward"]');
  // the run trains on both cores while the webview loads: on a loaded 2-core machine the first paint took over 30 s once
  await reward.waitFor({ timeout: 90_000 });
  await frame.locator('vscode-badge.live').waitFor({ timeout: 15_000 });
  const first = Number(await reward.getAttribute('data-points'));
  // Ten more steps drawn while it trains.
  let now = first;
  for (let i = 0; i < 600 && now < first + 10; i++) {
    await sleep(100);
    now = Number(await reward.getAttribute('data-points'));
  }
  log(`reward points ${first} → ${now}`);
  assert.ok(now >= first + 10, `points were added live (${first} → ${now})`);
  const latencies = JSON.parse(await frame.locator('body').getAttribute('data-latencies'));
  const sorted = [...latencies].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  log(`live update latency (run/metrics in the host → point drawn): median ${median} ms over ${latencies.length} points; all: ${latencies.join(' ')}`);
  assert.ok(latencies.length >= 10, `a latency per live point (${latencies.length})`);
  assert.ok(median < 1000, `median latency ${median} ms`);
  await shot(page, 'dash-02-live');
  await palette(page, 'Credit Lens: Stop Run');
  await showRunsView(page);
  await waitForRow(page, /^live-\d{8}-\d{6}.*\bstopped\b/, 120_000);
  await frame.locator('vscode-badge.live').waitFor({ state: 'detached', timeout: 15_000 });
  await closeEditors(page);
  // The engine that trained it is the installed .vsix's, which has no node_modules: Dawn's dawn.node and the OpenBLAS
  // addon it loaded are the copies the .vsix carries. Here Dawn offers only lavapipe, which auto passes over.
  const [live] = runDirs('live');
  const info = JSON.parse(readFileSync(join(live, 'run.json'), 'utf8'));
  log(`live run: backend ${info.backend} (${info.backend_reason})`);
  assert.equal(info.backend, 'wasm-blas');
  assert.match(info.backend_reason, /^webgpu adapter llvmpipe.* is a CPU rasteriser, not picked by auto; .*wasm SIMD with products on OpenBLAS/);
});

scenario('two runs selected in the Runs tree compare with a legend entry each; a chart exports as PNG and CSV', async () => {
  const { page } = vs;
  await showRunsView(page);
  // run rows by their accessible name: the folder's, where the row shows the short name
  const row = (re) => page.locator('.sidebar .pane-body').getByRole('treeitem', { name: re }).first();
  // Select exactly the two runs, and check that the tree shows both selected before asking: a tree refresh that
  // lands between the clicks (a run directory's watcher event) can re-render the rows and drop the Ctrl-click.
  const selected = async () =>
    (await row(/^tiny-\d{8}/).getAttribute('aria-selected')) === 'true' && (await row(/^tiny-attr-\d{8}/).getAttribute('aria-selected')) === 'true';
  for (let attempt = 1; ; attempt++) {
    await row(/^tiny-\d{8}/).click();
    await row(/^tiny-attr-\d{8}/).click({ modifiers: ['Control'] });
    await sleep(300);
    if (await selected()) break;
    assert.ok(attempt < 5, 'the two runs stay selected in the Runs tree');
    log(`selection attempt ${attempt} did not hold; again`);
  }
  await row(/^tiny-attr-\d{8}/).click({ button: 'right' });
  // A click that lands while the menu is still settling can be dropped; a hovered item takes Enter too.
  const item = page.locator('.monaco-menu .action-label', { hasText: 'Compare Runs' });
  await item.hover({ timeout: 10_000 });
  await item.click();
  if (await item.isVisible().catch(() => false)) await page.keyboard.press('Enter');
  const frame = webview(page);
  const entries = frame.locator('.run-legend .entry');
  await entries.first().waitFor({ timeout: 30_000 });
  for (let i = 0; i < 50 && (await entries.count()) < 2; i++) await sleep(200);
  assert.equal(await entries.count(), 2);
  const names = await entries.evaluateAll((es) => es.map((e) => e.dataset.run));
  log(`legend: ${names.join(', ')}`);
  assert.ok(names.some((n) => /^tiny-\d{8}/.test(n)) && names.some((n) => /^tiny-attr-\d{8}/.test(n)), `${names}`);
  // the legend names the runs by what tells them apart, and the tab counts them, neither by a folder's timestamp
  const shown = await entries.evaluateAll((es) => es.map((e) => e.querySelector('a').textContent.trim()));
  assert.deepEqual(shown.sort(), ['tiny', 'tiny-attr']);
  await page.locator('.tab', { hasText: /Compare: tiny(-attr)? vs tiny(-attr)?(?!-\d)/ }).waitFor({ timeout: 5_000 });
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await sleep(800);
  const charts = await chartState(frame);
  // The attribution run adds its own metrics' charts.
  assert.ok(
    charts.some((c) => c.id === 'attribution/attribution_entropy' && c.points > 0 && c.ink),
    'attribution entropy chart',
  );
  assert.ok(
    charts.some((c) => c.id === 'attribution/attribution_range' && c.points > 0),
    'attribution max/min/std chart',
  );
  // Each run's curve is in the reward chart's uPlot legend.
  const series = await frame.locator('section.chart[data-chart="reward"] .u-legend .u-series').count();
  assert.equal(series, 3, 'x plus one reward series per run');
  await shot(page, 'dash-03-compare', { readme: 'compare-runs' });

  const csvPath = join(WS, 'runs', 'compare-reward.csv');
  await frame.locator('section.chart[data-chart="reward"] vscode-button.csv').click();
  await acceptSaveDialog(page, csvPath);
  const csv = readFileSync(csvPath, 'utf8').trim().split('\n');
  log(`csv: ${csv[0]}`);
  // Runs are named by their config name in a comparison when the names differ.
  assert.equal(
    csv[0],
    'step,phase,tiny,tiny-attr,tiny · reward_mean - reward_std,tiny · reward_mean + reward_std,tiny-attr · reward_mean - reward_std,tiny-attr · reward_mean + reward_std',
  );
  assert.equal(csv.length, 1 + 12, 'a line per GRPO step of the longer run (12)');
  const pngPath = join(WS, 'runs', 'compare-reward.png');
  await frame.locator('section.chart[data-chart="reward"] vscode-button.png').click();
  await acceptSaveDialog(page, pngPath);
  assert.equal(readFileSync(pngPath).subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'a PNG file');

  // The comparison's table names the step it reads every run at, and a picker offers the others both evaluated.
  const heading = frame.locator('section.significance h2');
  const table = frame.locator('section.significance table.comparison');
  await table.waitFor({ timeout: 120_000 });
  const picker = frame.locator('select.step-picker');
  const selectedText = () => picker.evaluate((s) => s.options[s.selectedIndex].text);
  // tiny evaluated at 0, 4, 8, 12 and tiny-attr (8 steps) at 0, 4, 8: both are read at 8, the latest both evaluated.
  assert.equal(await selectedText(), 'GRPO step 8, the latest all evaluated');
  assert.match(await frame.locator('section.significance .compare-note').innerText(), /at step 8\b/);
  const offered = await picker.evaluate((s) => [...s.options].map((o) => o.text));
  log(`step picker: ${offered.join(' | ')}`);
  // step 8 once: the first option names it
  assert.deepEqual(offered.slice(1), ['GRPO step 4', 'step 0 (the warm starts)']);
  // At step 0 both runs are their SFT warm starts: the table says so and bolds nothing.
  await picker.selectOption('0');
  await frame.locator('section.significance .compare-note', { hasText: 'at step 0' }).waitFor({ timeout: 120_000 });
  assert.equal(await selectedText(), 'step 0 (the warm starts)');
  assert.match(await frame.locator('section.significance .compare-note').innerText(), /SFT warm start, before any GRPO step/);
  assert.equal(await table.locator('tr.significant').count(), 0);
  assert.match(await heading.innerText(), /^Eval success at/);
  await picker.selectOption('last');
  await frame.locator('section.significance .compare-note', { hasText: 'at step 8' }).waitFor({ timeout: 120_000 });
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  await closeEditors(page);
});

scenario('the credit-analysis view shows the position-bin table, re-runs on a step range, compares with a baseline and survives a reload', async () => {
  const { page } = vs;
  await paletteAndPick(page, 'Credit Lens: Open Credit Analysis', /^tiny-attr-\d{8}/);
  const frame = webview(page);
  const bins = frame.locator('table.position_bins tbody tr');
  await bins.first().waitFor({ timeout: 60_000 });
  assert.equal(await bins.count(), 10, 'ten relative-position bins');
  // The table holds what `credit-lens analyze --json` says: the first bin's token count.
  const cli = JSON.parse(spawnSync(process.execPath, [join(ROOT, 'dist/engine/cli.js'), 'analyze', attribution, '--json'], { encoding: 'utf8' }).stdout);
  const firstCount = await bins.first().locator('td').nth(2).innerText();
  assert.equal(Number(firstCount), cli.relative_position[0].count);
  for (const t of ['contribution', 't_stats', 'token_types', 'type_by_position', 'reward_sign', 'weights', 'top_filler_abs']) {
    assert.equal(await frame.locator(`section[data-table="${t}"]`).count(), 1, `${t} table`);
  }

  // vscode-textfield keeps its <input> in an open shadow root, which Playwright's CSS selectors enter.
  await frame.locator('#from-step input').fill('3');
  await frame.locator('#to-step input').fill('6');
  await frame.locator('vscode-button.apply').click();
  await frame.locator('.card', { hasText: 'steps 3–6' }).waitFor({ timeout: 60_000 });

  await frame.locator('vscode-button.baseline').click();
  await pickRun(page, /^tiny-\d{8}/);
  const appendix = frame.locator('section[data-table="appendix_b"] tbody tr');
  await appendix.first().waitFor({ timeout: 60_000 });
  assert.equal(await appendix.count(), 4, 'baseline, this run, delta, paired test');
  // The paired test on the same eval instances: at the step shown, the interval, the exact test's p (one
  // seed per side: McNemar's), n.s. when not significant, the MDE, and that it is conditional on these two checkpoints (one seed each: no verdict on the methods).
  const paired = (await appendix.nth(3).innerText()).replace(/\s+/g, ' ');
  log(`appendix B paired test: ${paired}`);
  assert.match(
    paired,
    /paired test step \d+, \d+ test instances: Δ [+-]\d+\.\d pts \[[+-]?\d+\.\d, [+-]?\d+\.\d\], p [\d.e-]+( · n\.s\.)?( · MDE ± \d+\.\d pp)? · conditional on these two checkpoints, no verdict on the methods \(one seed each\)/,
  );
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
  // The export notifications of the scenario before would cover the tables.
  await palette(page, 'Notifications: Clear All Notifications', { pick: 'Clear All Notifications' });
  await sleep(800);
  await shot(page, 'dash-04-analysis');

  // After a reload the view comes back with its step range and baseline.
  await palette(page, 'Developer: Reload Window', { pick: 'Reload Window' });
  await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
  const restored = webview(page);
  await restored.locator('.card', { hasText: 'steps 3–6' }).waitFor({ timeout: 60_000 });
  await restored.locator('section[data-table="appendix_b"]').waitFor({ timeout: 30_000 });

  // A theme change repaints the charts in the new theme's colours (last, so no other screenshot is affected).
  const body = restored.locator('body');
  const before = await body.getAttribute('data-chart-foreground');
  const themeClass = await body.getAttribute('class');
  await palette(page, 'Preferences: Color Theme', { pick: 'Preferences: Color Theme' });
  const themeInput = page.locator('.quick-input-widget .quick-input-box input');
  await themeInput.fill(/vscode-light/.test(themeClass) ? 'Dark Modern' : 'Light Modern');
  await page.keyboard.press('Enter');
  for (let i = 0; i < 100 && (await body.getAttribute('data-chart-foreground')) === before; i++) await sleep(100);
  const after = await body.getAttribute('data-chart-foreground');
  log(`theme: ${themeClass} → ${await body.getAttribute('class')}; chart foreground ${before} → ${after}`);
  assert.notEqual(after, before, 'the charts re-read the theme colours');
  await palette(page, 'View: Toggle Primary Side Bar Visibility', { pick: 'Toggle Primary Side Bar Visibility' });
});
