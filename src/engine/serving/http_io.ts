// The HTTP side of `credit-lens serve` that knows no API: the request being answered (so its work goes when its client
// does), a request body read within its bound, an answer sent whole or streamed (a LazyList's rows one at a time, with
// backpressure), and the listening address checked before the model loads.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { UserError } from '../core/errors';
import { BadRequest, LazyList } from '../server_apis/types';

/** The request a route is answering, so the work it queues can be dropped once its client has gone. */
export const current = new AsyncLocalStorage<{ gone: AbortSignal }>();

/** A job whose client closed its connection before the answer: its rows are dropped, as SGLang and vLLM abort them. */
export class ClientGone extends Error {}

/** The largest request body: 16,384 rows of 512 ids fit; a body past it is refused before it is read whole. */
const MAX_BODY_BYTES = 64 * 2 ** 20;

export async function readBody(req: IncomingMessage): Promise<unknown> {
  const tooLarge = () => new BadRequest(`the request body is over ${MAX_BODY_BYTES / 2 ** 20} MiB, the most one request may send`, null, 413);
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw tooLarge();
    chunks.push(c as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`the request body is not JSON: ${(e as Error).message}`);
  }
}

export function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json' });
  res.end(text);
}

export const holdsLazy = (v: unknown) => typeof v === 'object' && v !== null && Object.values(v).some((x) => x instanceof LazyList);

/** The JSON of `v` in pieces: a LazyList's items one at a time (and the object or list holding one), all else whole. */
function* jsonPieces(v: unknown): Generator<string> {
  if (v instanceof LazyList) {
    yield '[';
    for (let i = 0; i < v.length; i++) {
      if (i) yield ',';
      yield* jsonPieces(v.item(i));
    }
    yield ']';
  } else if (Array.isArray(v) && holdsLazy(v)) {
    yield '[';
    for (let i = 0; i < v.length; i++) yield (i ? ',' : '') + (v[i] instanceof LazyList ? [...jsonPieces(v[i])].join('') : JSON.stringify(v[i] ?? null));
    yield ']';
  } else if (typeof v === 'object' && v !== null && holdsLazy(v)) {
    yield '{';
    let first = true;
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) continue;
      yield `${first ? '' : ','}${JSON.stringify(k)}:`;
      first = false;
      yield* jsonPieces(x);
    }
    yield '}';
  } else yield JSON.stringify(v ?? null);
}

/**
 * A JSON answer that holds a LazyList, written as it is made, waiting for the client to read (backpressure), and
 * abandoned once the client has gone.
 */
export async function sendStream(res: ServerResponse, body: unknown): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json' });
  let buffered = '';
  for (const piece of jsonPieces(body)) {
    if (res.destroyed) return;
    buffered += piece;
    if (buffered.length < 1 << 16) continue;
    const more = res.write(buffered);
    buffered = '';
    if (!more) await new Promise<void>((ok) => (res.once('drain', ok), res.once('close', ok)));
  }
  res.end(buffered);
}

/** Why the server cannot listen there, as a user error naming the address and what to do. */
export function bindError(host: string, port: number, e: NodeJS.ErrnoException): UserError {
  const why =
    e.code === 'EADDRINUSE'
      ? `port ${port} is taken (another server, or an earlier credit-lens serve still running)`
      : e.code === 'EADDRNOTAVAIL' || e.code === 'ENOTFOUND'
        ? `${host} is not an address of this machine`
        : e.code === 'EACCES'
          ? `port ${port} needs privileges to listen on`
          : e.message;
  return new UserError(
    `serve: cannot listen on ${host}:${port}: ${why}`,
    'pass --port with a free port (0 takes any), or --host with an address of this machine',
  );
}

/** Listens on host:port and closes again: the address is usable, or a user error says why. Port 0 always is. */
export async function checkBind(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((ok, bad) => {
    const probe = createNetServer();
    probe.once('error', (e: NodeJS.ErrnoException) => bad(bindError(host, port, e)));
    probe.listen(port, host, () => probe.close(() => ok()));
  });
}
