// Sweeps on Slurm in VS Code, against the real one-node cluster of test/slurm/cluster.sh: Run Sweep on a
// config with `sweep.executor: slurm` submits one job array; the Runs tree shows each task's Slurm job and state
// (pending tasks before they have a run directory), the sweep summary fills in as runs finish, and one run is
// cancelled from the summary with scancel. Harness and how to run: harness.mjs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { existsSync, readdirSync } from 'node:fs';
import {
  ROOT,
  finishSuite,
  log,
  openSweepDialog,
  prepareSuite,
  readJson,
  runDirs,
  scenario,
  shot,
  showRunsView,
  sleep,
  startVsCode,
  waitForRow,
} from './harness.mjs';

const CLUSTER = join(ROOT, 'test/slurm/cluster.sh');
let vs;

before(async () => {
  prepareSuite();
  execFileSync('bash', [CLUSTER, 'start'], { stdio: 'inherit' });
  vs = await startVsCode('slurm', { trusted: true });
});

after(async () => {
  await finishSuite();
  spawnSync('scancel', ['-u', 'root']);
  for (let i = 0; i < 60 && spawnSync('squeue', ['-h'], { encoding: 'utf8' }).stdout.trim(); i++) await sleep(1000);
  execFileSync('bash', [CLUSTER, 'stop'], { stdio: 'inherit' });
});

scenario('Run Sweep with executor slurm: one job array; the tree shows Slurm states, the summary fills in, one run is scancelled', async () => {
  const { page } = vs;
  const dialog = await openSweepDialog(page, 'slurm.credit.yaml');
  assert.match(await dialog.innerText(), /3 runs as one Slurm job array \(time 10:00, at most 1 at once\)/);
  await dialog.locator('.monaco-button', { hasText: 'Submit 3 Runs to Slurm' }).click();

  // The summary opens with one row per array task, each naming its task.
  const frame = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');
  const rows = frame.locator('vscode-table-row.run-row');
  await rows.first().waitFor({ timeout: 60_000 });
  assert.equal(await rows.count(), 3);
  const job = (await frame.locator('.slurm').first().innerText()).match(/^(\d+)_0/)?.[1];
  assert.ok(job, 'the first row names its array task');
  log(`Slurm job ${job}`);

  // The throttle (%1) keeps tasks 1 and 2 pending while task 0 trains: the tree shows them before any run directory.
  await showRunsView(page);
  const pending = await waitForRow(page, new RegExp(`slurm ${job}_2 PENDING`), 60_000);
  log(`tree: ${pending}`);
  await waitForRow(page, new RegExp(`slurm ${job}_0 RUNNING`), 60_000);
  await shot(page, 'slurm-tree', { readme: 'slurm-tree' });

  // Cancel the last run from the summary: scancel of that task only.
  await page.locator('.tab', { hasText: 'Sweep: slurm' }).first().click();
  await frame.locator('vscode-table-row.run-row').nth(2).locator('a.cancel-run').click();
  await frame.locator('vscode-table-row.run-row[data-status="cancelled"]').waitFor({ timeout: 60_000 });

  // The other two complete, one after the other, and the summary fills in.
  await frame.locator('vscode-table-row.run-row[data-status="completed"]').nth(1).waitFor({ timeout: 300_000 });
  const statuses = await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute('data-status')));
  assert.deepEqual(statuses, ['completed', 'completed', 'cancelled']);
  const evals = await rows.evaluateAll((rs) => rs.map((r) => r.querySelectorAll('vscode-table-cell')[4].textContent.trim()));
  assert.ok(
    evals.slice(0, 2).every((t) => /^\d+\.\d%$/.test(t)),
    `final eval filled in: ${evals}`,
  );
  // Slurm's own record catches up (COMPLETED), and with nothing left to wait for the sweep is no longer active.
  await frame.locator('vscode-button', { hasText: 'Cancel sweep' }).waitFor({ state: 'detached', timeout: 60_000 });
  await frame.locator('.slurm', { hasText: `${job}_1 COMPLETED` }).waitFor({ timeout: 60_000 });
  await shot(page, 'slurm-sweep', { readme: 'slurm-sweep' });

  // On disk: two completed run directories under the config's output_dir; the cancelled task's folder was reserved when
  // the sweep was prepared (so no other sweep can take it) and stays empty: no run.json, not a run.
  const all = runDirs('slurm');
  assert.equal(all.length, 3, JSON.stringify(all));
  const dirs = all.filter((d) => existsSync(join(d, 'run.json')));
  assert.equal(dirs.length, 2, JSON.stringify(all));
  for (const d of dirs) assert.equal(readJson(join(d, 'run.json')).status, 'completed');
  assert.deepEqual(readdirSync(all.find((d) => !dirs.includes(d))), [], 'the cancelled task never started in its folder');
  await showRunsView(page);
  await waitForRow(page, new RegExp(`completed .*slurm ${job}_1 COMPLETED`), 60_000);
});
