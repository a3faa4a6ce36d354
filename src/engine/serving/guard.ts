// Who may drive `credit-lens serve`, as SGLang and vLLM decide it with --api-key, plus what a browser can reach:
// - a key (`--api-key`, or $CREDIT_LENS_API_KEY) is asked of every request but GET /health once it is set, sent as
//   `Authorization: Bearer <key>` (both servers' form, and what the client sends from the same variable);
// - without a key, only a loopback server changes state (weights, adapters, caches), and a request must name the
//   server by an address of its own in Host, so a DNS-rebinding page (Host: evil.example) reads nothing;
// - a state-changing request never carries an Origin (browsers send one; clients of a server do not), and every POST
//   with a body is application/json, which a cross-origin page cannot send without a preflight this server never answers;
// - weights and adapters load only from folders given at start (`--allow-path`), and the served model's own.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import { existsSync, realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { RefusedLoad } from '../server_apis/types';

/** The variable both sides read the key from: `serve` when no --api-key is given, the client always. */
export const API_KEY_ENV = 'CREDIT_LENS_API_KEY';

export interface GuardOptions {
  /** the address the server listens on */
  host: string;
  /** the key every request must carry, or null */
  apiKey: string | null;
  /** folders weights and adapters may load from */
  allowPaths: string[];
}

/** A request the guard refuses: its status and why, in words that say what to do. */
export interface Refusal {
  status: number;
  message: string;
}

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '::1'];

export function isLoopback(host: string): boolean {
  return LOOPBACK_NAMES.includes(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

const isWildcard = (host: string) => host === '0.0.0.0' || host === '::';

/** The name in a Host header, without its port or IPv6 brackets. */
function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']'));
  const colon = h.lastIndexOf(':');
  return colon > 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
}

const digest = (s: string) => createHash('sha256').update(s).digest();

export class Guard {
  private readonly key: Buffer | null;
  private readonly names: Set<string> | null;
  private readonly allowed: string[];

  constructor(private readonly o: GuardOptions) {
    this.key = o.apiKey ? digest(o.apiKey) : null;
    const host = o.host.toLowerCase();
    // a wildcard bind answers to any name this machine has: none can be listed, so a key is the only gate there
    this.names = isWildcard(host) ? null : new Set(isLoopback(host) ? [...LOOPBACK_NAMES, host] : [host, hostname().toLowerCase()]);
    this.allowed = o.allowPaths.map((p) => (existsSync(p) ? realpathSync(p) : resolve(p)));
  }

  /** Whether state-changing routes answer anyone at all: with a key, or on loopback. */
  get changesAllowed(): boolean {
    return this.key !== null || isLoopback(this.o.host);
  }

  /** What the start-up line says of who may drive the server (never the key). */
  describe(): string {
    const paths = this.allowed.length ? this.allowed.join(', ') : 'none';
    if (this.key) return `API key required (Authorization: Bearer); weights and adapters load from ${paths}`;
    return this.changesAllowed
      ? `no API key (loopback only); weights and adapters load from ${paths}`
      : `no API key: generation and scoring only, weight and adapter loads are refused (start with --api-key to allow them)`;
  }

  /** Why a request is refused, or null. `changes`: the route loads weights or adapters, or drops a cache. */
  check(req: IncomingMessage, route: string, changes: boolean): Refusal | null {
    const auth = req.headers.authorization;
    if (this.key) {
      if (route === 'GET /health') return null;
      const given = typeof auth === 'string' && /^bearer\s+/i.test(auth) ? auth.replace(/^bearer\s+/i, '') : null;
      if (given === null) return { status: 401, message: `this server needs an API key: send Authorization: Bearer <key> (the client reads $${API_KEY_ENV})` };
      if (!timingSafeEqual(digest(given), this.key)) return { status: 401, message: 'the API key is wrong' };
    } else if (this.names && typeof req.headers.host === 'string' && !this.names.has(hostName(req.headers.host))) {
      return {
        status: 403,
        message: `Host ${JSON.stringify(req.headers.host)} is not a name of this server (${[...this.names].join(', ')}); address it by one, or start it with --api-key`,
      };
    }
    if (changes) {
      if (!this.changesAllowed)
        return { status: 403, message: `${route} changes the server's state, which needs an API key on a non-loopback address: start serve with --api-key` };
      if (req.headers.origin !== undefined)
        return { status: 403, message: `${route} is refused from a web page (the request carries Origin ${JSON.stringify(req.headers.origin)})` };
    }
    const length = Number(req.headers['content-length'] ?? 0);
    const chunked = req.headers['transfer-encoding'] !== undefined;
    const type = String(req.headers['content-type'] ?? '');
    if (req.method === 'POST' && (length > 0 || chunked) && !/^application\/json\b/i.test(type))
      return { status: 415, message: `a POST body must be application/json (got ${type ? JSON.stringify(type) : 'no content-type'})` };
    return null;
  }

  /** The real path of a folder or file to load, if it lies inside an allowed folder; else RefusedLoad naming them. */
  allowedPath(path: string): string {
    const real = existsSync(path) ? realpathSync(path) : resolve(path);
    const inside = this.allowed.some((a) => {
      const r = relative(a, real);
      return r === '' || (!r.startsWith('..') && !isAbsolute(r));
    });
    if (!inside)
      throw new RefusedLoad(
        `${path} is outside the folders this server loads from (${this.allowed.join(', ') || 'none'}); start serve with --allow-path <folder> to allow it`,
      );
    return real;
  }
}
