// The two wire formats: OpenAI chat completions (which llama.cpp's server, vLLM and Ollama also speak) and Gemini's
// generateContent. Keys travel in headers only: a key in a URL ends up in logged URLs and proxy logs.
import type { HttpRequest } from './http';
import type { OraclePrompt } from './prompt';

export const GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com';

function trimSlash(u: string): string {
  return u.replace(/\/+$/, '');
}

/**
 * POST {base_url}/v1/chat/completions. A base_url that already ends in /v1 (how OpenAI's own SDKs spell it) is not
 * given a second one. temperature 0 makes the oracle as repeatable as the server allows.
 */
export function openaiRequest(baseUrl: string, model: string, key: string, p: OraclePrompt): HttpRequest {
  const base = trimSlash(baseUrl);
  return {
    url: `${base}${/\/v1$/.test(base) ? '' : '/v1'}/chat/completions`,
    headers: { authorization: `Bearer ${key}` },
    body: {
      model,
      messages: [
        { role: 'system', content: p.system },
        { role: 'user', content: p.user },
      ],
      temperature: 0,
    },
  };
}

/** The assistant's text: choices[0].message.content, a string or (some servers) a list of text parts. */
export function openaiReply(json: unknown): string | null {
  const content = (json as { choices?: { message?: { content?: unknown } }[] } | null)?.choices?.[0]?.message?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    const texts = content.map((c) => (c && typeof c === 'object' && typeof c.text === 'string' ? c.text : '')).join('');
    return texts || null;
  }
  return null;
}

/** POST {base}/v1beta/models/{model}:generateContent with the key in x-goog-api-key (Gemini's documented header). */
export function geminiRequest(baseUrl: string | null, model: string, key: string, p: OraclePrompt): HttpRequest {
  const base = trimSlash(baseUrl ?? GEMINI_BASE_URL);
  const name = model.replace(/^models\//, '');
  return {
    url: `${base}${/\/v1beta$/.test(base) ? '' : '/v1beta'}/models/${encodeURIComponent(name)}:generateContent`,
    headers: { 'x-goog-api-key': key },
    body: {
      systemInstruction: { parts: [{ text: p.system }] },
      contents: [{ role: 'user', parts: [{ text: p.user }] }],
      generationConfig: { temperature: 0, responseMimeType: 'application/json' },
    },
  };
}

/** candidates[0].content.parts[].text joined, leaving out thinking models' thought parts. */
export function geminiReply(json: unknown): string | null {
  const parts = (json as { candidates?: { content?: { parts?: unknown } }[] } | null)?.candidates?.[0]?.content?.parts;
  if (!Array.isArray(parts)) return null;
  const text = parts
    .filter((q) => q && typeof q === 'object' && typeof q.text === 'string' && q.thought !== true)
    .map((q) => q.text as string)
    .join('');
  return text || null;
}
