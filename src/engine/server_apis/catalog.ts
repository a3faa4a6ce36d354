// The server APIs, the whole list: `--server-api`, `rollout.api`, the client's identification and `credit-lens
// serve`'s routes all come from it. A new API is a file in this folder and a line here.
import { sglang } from './sglang';
import type { ServerApiSpec } from './types';
import { vllm } from './vllm';

export const SERVER_API_SPECS = [sglang, vllm] as const satisfies readonly ServerApiSpec[];

export type ServerApi = (typeof SERVER_API_SPECS)[number]['name'];
/** What `--server-api` and `rollout.api` take: auto asks the server which one it speaks. */
export const SERVER_APIS = ['auto', ...SERVER_API_SPECS.map((s) => s.name)] as unknown as readonly ['auto', ...ServerApi[]];

/** The spec of an API by its name. */
export function serverApi(name: string): ServerApiSpec {
  const spec = (SERVER_API_SPECS as readonly ServerApiSpec[]).find((s) => s.name === name);
  if (!spec) throw new Error(`no server API named ${name}`);
  return spec;
}
