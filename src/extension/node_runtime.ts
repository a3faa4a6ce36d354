// Which Node runs the engine (design.md#protocol): the setting, else `node` on PATH, else VS Code's own runtime.
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

export interface NodeChoice {
  command: string;
  /** Extra environment for the child. */
  env: Record<string, string>;
  /** Shown in the log so a user can tell why their backend is wasm and not tfjs-node. */
  reason: string;
}

function isExecutableFile(path: string): boolean {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first `node` on `pathVar`, as a shell would find it; undefined when there is none. */
export function findOnPath(name: string, pathVar = process.env.PATH ?? '', platform = process.platform): string | undefined {
  const exts = platform === 'win32' ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of pathVar.split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = join(dir, name + ext.toLowerCase());
      if (isExecutableFile(candidate)) return candidate;
    }
  }
  return undefined;
}

export function chooseNode(setting: string | undefined): NodeChoice {
  const configured = setting?.trim();
  if (configured) {
    if (!isExecutableFile(configured)) {
      throw new Error(`creditLens.nodePath is "${configured}", which is not an executable file. Fix the setting or clear it to use \`node\` on PATH.`);
    }
    return { command: configured, env: {}, reason: 'creditLens.nodePath' };
  }
  const onPath = findOnPath('node');
  if (onPath) return { command: onPath, env: {}, reason: '`node` on PATH' };
  // Electron's Node: tfjs-node's addons are built for the system Node's ABI and do not load here; the engine's own
  // addons (blas.node for wasm-blas, Dawn's dawn.node for webgpu) are Node-API, whose ABI does not depend on the runtime.
  return {
    command: process.execPath,
    env: { ELECTRON_RUN_AS_NODE: '1' },
    reason: "VS Code's own runtime (no `node` on PATH; backends webgpu, wasm-blas, wasm and cpu, not tfjs-node)",
  };
}
