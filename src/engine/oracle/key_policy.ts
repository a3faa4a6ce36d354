// Where an API key may be sent, and which environment variables may hold one: the oracle's key policy, applied where a
// config names a base URL and a key variable, so that a config from someone else's repository cannot send a key to its
// author's server or name PATH as the key.
/** `*_API_KEY`, `*_KEY`, `*_TOKEN` (any case). */
export const KEY_LIKE_ENV = /^[A-Za-z_][A-Za-z0-9_]*_(KEY|TOKEN)$/i;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** Why an oracle URL may not carry a key, or null: https anywhere, plain http only to this machine (a local vLLM, Ollama). */
export function keySafeUrl(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'expected an http(s) URL';
  }
  if (u.username || u.password) return 'credentials in the URL would be logged and cached; give the key through api_key_env';
  if (u.protocol === 'https:') return null;
  if (u.protocol === 'http:' && (LOOPBACK.has(u.hostname) || /^127\.\d+\.\d+\.\d+$/.test(u.hostname))) return null;
  if (u.protocol === 'http:') return `the API key is only sent over https, or over http to this machine (localhost, 127.0.0.1, ::1); ${u.hostname} is neither`;
  return 'expected an http(s) URL';
}
