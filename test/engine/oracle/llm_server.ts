// A real HTTP server on 127.0.0.1 (port 0) that speaks the OpenAI chat-completions and Gemini generateContent wire
// formats, for the oracle tests. It stands in for the remote LLM, not for any part of ours: each test scripts its
// answers (and faults) and reads back what arrived, how many requests were in flight at once, and the headers.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Received {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
  /** the user prompt text, whichever wire format carried it */
  prompt: string;
}

export type Action =
  | { status?: number; headers?: Record<string, string>; body: string; delayMs?: number }
  /** never answer (the client's timeout must fire) */
  | { hang: true }
  /** send the headers and half the promised body, then drop the connection */
  | { cut: string };

export interface LlmServer {
  url: string;
  received: Received[];
  maxInFlight: number;
  close(): Promise<void>;
}

function promptOf(body: unknown): string {
  const b = body as { messages?: { role: string; content: string }[]; contents?: { parts: { text: string }[] }[] };
  if (b?.messages)
    return b.messages
      .filter((m) => m.role === 'user')
      .map((m) => m.content)
      .join('\n');
  if (b?.contents) return b.contents.flatMap((c) => c.parts.map((p) => p.text)).join('\n');
  return '';
}

export async function startLlmServer(handler: (r: Received, n: number) => Action | Promise<Action>): Promise<LlmServer> {
  const sockets = new Set<Socket>();
  const state = { inFlight: 0, maxInFlight: 0, received: [] as Received[] };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    state.inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        state.inFlight--;
      }
    };
    res.on('close', finish);
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const r: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, prompt: promptOf(body) };
    const n = state.received.length;
    state.received.push(r);
    const a = await handler(r, n);
    if ('hang' in a) return;
    if ('cut' in a) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(a.cut.length * 2) });
      res.write(a.cut, () => res.destroy());
      return;
    }
    if (a.delayMs) await new Promise((ok) => setTimeout(ok, a.delayMs));
    finish();
    res.writeHead(a.status ?? 200, { 'content-type': 'application/json', ...a.headers });
    res.end(a.body);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received: state.received,
    get maxInFlight() {
      return state.maxInFlight;
    },
    close: () =>
      new Promise<void>((ok) => {
        for (const s of sockets) s.destroy();
        server.close(() => ok());
      }),
  };
}

export function openaiAnswer(content: string): string {
  return JSON.stringify({
    id: 'chatcmpl-test',
    object: 'chat.completion',
    model: 'judge',
    choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
  });
}

export function geminiAnswer(text: string): string {
  return JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP' }] });
}

/** The incorrect completion inside a prompt built by buildOraclePrompt. */
export function incorrectOf(prompt: string): string {
  const m = /<incorrect_solution>\n([\s\S]*)\n<\/incorrect_solution>/.exec(prompt);
  if (!m) throw new Error(`no incorrect solution in prompt: ${prompt.slice(0, 200)}`);
  return m[1];
}

/** A plausible judge: blames the first non-empty line of the completion after its "<think>", tags stripped. */
export function firstLineSpan(incorrect: string): string {
  const body = incorrect.replace(/^<think>/, '');
  const line = body
    .split('\n')
    .map((l) => l.replace(/<\/?(think|answer)>/g, '').trim())
    .find((l) => l !== '');
  return line ?? body;
}
