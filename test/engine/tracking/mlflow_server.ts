// A stand-in MLflow tracking server on 127.0.0.1, kept for what a real one does not do on demand: a 429 or a dropped
// connection on the Nth call, a server without proxied artifacts, a dead one. Everything a real server can show is
// tested against `mlflow server` itself (mlflow_real.test.ts). The REST calls Credit Lens uses, answered as MLflow documents them
// (https://mlflow.org/docs/latest/api_reference/rest-api.html): JSON bodies, {error_code, message} errors with their
// HTTP statuses, runs/log-batch's limits (1,000 metrics, 100 params, 1,000 entities, 1 MB), params that cannot change,
// and artifacts proxied under /api/2.0/mlflow-artifacts/artifacts/. Faults are scripted per endpoint: a 429 or a
// dropped connection on the Nth call.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRun {
  run_id: string;
  experiment_id: string;
  run_name: string;
  status: string;
  start_time: number;
  end_time?: number;
  tags: Record<string, string>;
  params: Record<string, string>;
  metrics: { key: string; value: number; step: number; timestamp: number }[];
  statuses: string[];
  /** log-batch requests that carried params */
  paramBatches: number;
}

export interface FakeMlflow {
  url: string;
  experiments: Map<string, string>;
  runs: Map<string, FakeRun>;
  artifacts: Map<string, string>;
  /** every request: method, path, Authorization header */
  requests: { method: string; path: string; auth: string | undefined }[];
  /** faults by endpoint (e.g. 'runs/log-batch'): the calls (1-based, counted per endpoint) that fail, and how */
  faults: Map<string, Map<number, '429' | 'drop' | '503'>>;
  /** whether the artifact store is proxied (artifact_uri mlflow-artifacts:/…) or not (s3://…) */
  proxyArtifacts: boolean;
  close(): Promise<void>;
}

const err = (res: ServerResponse, status: number, code: string, message: string) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error_code: code, message }));
};
const ok = (res: ServerResponse, body: unknown) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};

export async function startFakeMlflow(): Promise<FakeMlflow> {
  const experiments = new Map<string, string>([['Default', '0']]);
  const runs = new Map<string, FakeRun>();
  const artifacts = new Map<string, string>();
  const requests: FakeMlflow['requests'] = [];
  const faults = new Map<string, Map<number, '429' | 'drop' | '503'>>();
  const calls = new Map<string, number>();
  let nextRun = 1;
  const state = { proxyArtifacts: true };

  const handle = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const url = new URL(req.url!, 'http://x');
    requests.push({ method: req.method!, path: url.pathname, auth: req.headers.authorization });
    const artifactPrefix = '/api/2.0/mlflow-artifacts/artifacts/';
    if (url.pathname.startsWith(artifactPrefix)) {
      if (req.method !== 'PUT') return err(res, 405, 'ENDPOINT_NOT_FOUND', 'only PUT here');
      artifacts.set(decodeURIComponent(url.pathname.slice(artifactPrefix.length)), body.toString('utf8'));
      return ok(res, {});
    }
    const endpoint = url.pathname.replace(/^\/api\/2\.0\/mlflow\//, '');
    const n = (calls.get(endpoint) ?? 0) + 1;
    calls.set(endpoint, n);
    const fault = faults.get(endpoint)?.get(n);
    if (fault === 'drop') return req.socket.destroy();
    if (fault === '429') return err(res, 429, 'REQUEST_LIMIT_EXCEEDED', 'Too many requests');
    if (fault === '503') return err(res, 503, 'TEMPORARILY_UNAVAILABLE', 'unavailable');
    let j: Record<string, unknown> = {};
    if (req.method === 'POST') {
      if (body.length > 1_000_000) return err(res, 400, 'INVALID_PARAMETER_VALUE', 'request body exceeds 1 MB');
      try {
        j = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        return err(res, 400, 'MALFORMED_REQUEST', 'body is not JSON');
      }
    }
    const runOf = (id: unknown) => runs.get(String(id));
    switch (`${req.method} ${endpoint}`) {
      case 'GET experiments/get-by-name': {
        const name = url.searchParams.get('experiment_name') ?? '';
        const id = experiments.get(name);
        if (id === undefined) return err(res, 404, 'RESOURCE_DOES_NOT_EXIST', `Could not find experiment with name '${name}'`);
        return ok(res, { experiment: { experiment_id: id, name, lifecycle_stage: 'active', artifact_location: `mlflow-artifacts:/${id}` } });
      }
      case 'POST experiments/create': {
        const name = String(j.name ?? '');
        if (!name) return err(res, 400, 'INVALID_PARAMETER_VALUE', "Missing value for required parameter 'name'");
        if (experiments.has(name)) return err(res, 400, 'RESOURCE_ALREADY_EXISTS', `Experiment '${name}' already exists.`);
        const id = String(experiments.size + 100);
        experiments.set(name, id);
        return ok(res, { experiment_id: id });
      }
      case 'POST runs/create': {
        const expId = String(j.experiment_id);
        if (![...experiments.values()].includes(expId)) return err(res, 404, 'RESOURCE_DOES_NOT_EXIST', `No Experiment with id=${expId} exists`);
        const runId = `run${String(nextRun++).padStart(28, '0')}`;
        const tags = Object.fromEntries(((j.tags as { key: string; value: string }[]) ?? []).map((t) => [t.key, t.value]));
        const run: FakeRun = {
          run_id: runId,
          experiment_id: expId,
          run_name: String(j.run_name ?? ''),
          status: 'RUNNING',
          start_time: Number(j.start_time),
          tags,
          params: {},
          metrics: [],
          statuses: ['RUNNING'],
          paramBatches: 0,
        };
        runs.set(runId, run);
        const artifact_uri = state.proxyArtifacts ? `mlflow-artifacts:/${expId}/${runId}/artifacts` : `s3://bucket/${expId}/${runId}/artifacts`;
        return ok(res, {
          run: { info: { run_id: runId, run_uuid: runId, experiment_id: expId, run_name: run.run_name, status: 'RUNNING', artifact_uri }, data: {} },
        });
      }
      case 'GET runs/get': {
        const run = runOf(url.searchParams.get('run_id'));
        if (!run) return err(res, 404, 'RESOURCE_DOES_NOT_EXIST', `Run '${url.searchParams.get('run_id')}' not found`);
        const artifact_uri = state.proxyArtifacts ? `mlflow-artifacts:/${run.experiment_id}/${run.run_id}/artifacts` : `s3://bucket/${run.run_id}`;
        return ok(res, { run: { info: { run_id: run.run_id, experiment_id: run.experiment_id, status: run.status, artifact_uri }, data: {} } });
      }
      case 'POST runs/log-batch': {
        const run = runOf(j.run_id);
        if (!run) return err(res, 404, 'RESOURCE_DOES_NOT_EXIST', `Run '${String(j.run_id)}' not found`);
        const metrics = (j.metrics as FakeRun['metrics']) ?? [];
        const params = (j.params as { key: string; value: string }[]) ?? [];
        const tags = (j.tags as unknown[]) ?? [];
        if (metrics.length > 1000)
          return err(res, 400, 'INVALID_PARAMETER_VALUE', `A batch logging request can contain at most 1000 metrics. Got ${metrics.length} metrics.`);
        if (params.length > 100)
          return err(res, 400, 'INVALID_PARAMETER_VALUE', `A batch logging request can contain at most 100 params. Got ${params.length} params.`);
        if (metrics.length + params.length + tags.length > 1000)
          return err(res, 400, 'INVALID_PARAMETER_VALUE', 'A batch logging request can contain at most 1000 metrics, params and tags in total.');
        for (const p of params) {
          if (p.value.length > 6000)
            return err(
              res,
              400,
              'INVALID_PARAMETER_VALUE',
              `Param value '${p.value.slice(0, 20)}…' had length ${p.value.length}, which exceeded length limit of 6000`,
            );
          if (p.key in run.params && run.params[p.key] !== p.value)
            return err(
              res,
              400,
              'INVALID_PARAMETER_VALUE',
              `Changing param values is not allowed. Param with key='${p.key}' was already logged with value='${run.params[p.key]}'`,
            );
        }
        for (const m of metrics) {
          if (typeof m.value !== 'number' || typeof m.timestamp !== 'number' || !Number.isInteger(m.step))
            return err(res, 400, 'INVALID_PARAMETER_VALUE', `Invalid metric ${JSON.stringify(m)}`);
        }
        for (const p of params) run.params[p.key] = p.value;
        if (params.length) run.paramBatches++;
        run.metrics.push(...metrics);
        return ok(res, {});
      }
      case 'POST runs/update': {
        const run = runOf(j.run_id);
        if (!run) return err(res, 404, 'RESOURCE_DOES_NOT_EXIST', `Run '${String(j.run_id)}' not found`);
        if (j.status) {
          run.status = String(j.status);
          run.statuses.push(run.status);
        }
        if (j.end_time !== undefined) run.end_time = Number(j.end_time);
        return ok(res, { run_info: { run_id: run.run_id, status: run.status } });
      }
      default:
        return err(res, 404, 'ENDPOINT_NOT_FOUND', `No API endpoint ${req.method} ${url.pathname}`);
    }
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    experiments,
    runs,
    artifacts,
    requests,
    faults,
    get proxyArtifacts() {
      return state.proxyArtifacts;
    },
    set proxyArtifacts(v: boolean) {
      state.proxyArtifacts = v;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
