// The context an imported prompt is scored under. veRL's rollout dumps, and TRL up to 0.19, log prompts
// decoded with skip_special_tokens=True: the chat template's markers (<|im_start|>, <|im_end|>) are gone, but the text
// between them stays ("system\nYou are …\nuser\nWhat is …\nassistant\n"). Teacher-forcing the completion after that
// text scores it under a context the policy never saw. So, before encoding a logged prompt:
// - it has the markers (a special token of the tokenizer that its chat template writes): it is used as logged;
// - it is the template's text with the markers stripped: the markers are put back (restored);
// - it is a bare question: the template is applied with it as the user's message (applied).
// `--chat-template as-logged` skips all of this; `apply` applies (restores) even where the prompt has markers already.
import type { HfTokenizer } from '../model/tokenizer';

export type ChatTemplateMode = 'auto' | 'apply' | 'as-logged';

export type PromptRoute = 'as-logged' | 'has-markers' | 'restored' | 'applied' | 'no-template';

/** What the template does around a message, with and without its special tokens. */
interface Layout {
  /** special tokens the template writes */
  markers: string[];
  /** the rendering around the content, as is and with the markers stripped */
  pre: string;
  post: string;
  strippedPre: string;
  strippedPost: string;
}

const PLACEHOLDER = '\u0000CONTENT\u0000';

function layoutOf(tok: HfTokenizer): Layout | null {
  if (!tok.chatTemplate) return null;
  const rendered = tok.renderChat(PLACEHOLDER);
  const at = rendered.indexOf(PLACEHOLDER);
  if (at < 0) return null;
  const markers = tok.specialTexts().filter((t) => t.length > 0 && rendered.includes(t));
  const strip = (s: string) => markers.reduce((acc, m) => acc.split(m).join(''), s);
  const pre = rendered.slice(0, at);
  const post = rendered.slice(at + PLACEHOLDER.length);
  return { markers, pre, post, strippedPre: strip(pre), strippedPost: strip(post) };
}

/** Routes each logged prompt to the text that is encoded; one per tokenizer (the layout is rendered once). */
export class PromptTemplater {
  private readonly layout: Layout | null;
  readonly counts: Record<PromptRoute, number> = { 'as-logged': 0, 'has-markers': 0, restored: 0, applied: 0, 'no-template': 0 };

  constructor(
    private readonly tok: HfTokenizer | null,
    private readonly mode: ChatTemplateMode,
  ) {
    this.layout = tok && mode !== 'as-logged' ? layoutOf(tok) : null;
  }

  /** The text to encode for a logged prompt, and which route it took. */
  text(prompt: string): { text: string; route: PromptRoute } {
    const r = this.route(prompt);
    this.counts[r.route]++;
    return r;
  }

  private route(prompt: string): { text: string; route: PromptRoute } {
    if (this.mode === 'as-logged') return { text: prompt, route: 'as-logged' };
    const l = this.layout;
    if (!l || l.markers.length === 0) return { text: prompt, route: 'no-template' };
    if (this.mode === 'auto' && l.markers.some((m) => prompt.includes(m))) return { text: prompt, route: 'has-markers' };
    // The stripped layout around the content: put the markers back around the same content.
    if (l.strippedPre.length + l.strippedPost.length > 0 && prompt.startsWith(l.strippedPre) && prompt.endsWith(l.strippedPost)) {
      const content = prompt.slice(l.strippedPre.length, prompt.length - l.strippedPost.length);
      if (prompt.length >= l.strippedPre.length + l.strippedPost.length) return { text: l.pre + content + l.post, route: 'restored' };
    }
    return { text: this.tok!.renderChat(prompt), route: 'applied' };
  }

  /** One line for engine.log: how many prompts took each route, and what that means. */
  summary(): string | null {
    const c = this.counts;
    const total = Object.values(c).reduce((a, b) => a + b, 0);
    if (!total) return null;
    if (this.mode === 'as-logged') return `chat template: --chat-template as-logged: ${total} prompts encoded exactly as logged`;
    if (c['no-template'])
      return `chat template: the scoring tokenizer has no chat template with special-token markers; ${c['no-template']} prompts encoded as logged`;
    const parts = [
      c['has-markers'] ? `${c['has-markers']} already carried the template's markers (used as logged)` : '',
      c.restored ? `${c.restored} were the template's text with its markers stripped (decoded with skip_special_tokens): markers restored` : '',
      c.applied ? `${c.applied} had no template: applied with the prompt as the user's message` : '',
    ].filter(Boolean);
    return `chat template (${this.mode === 'auto' ? 'auto: applied where the markers are missing' : 'apply'}): ${parts.join('; ')}. --chat-template as-logged keeps every prompt as logged.`;
  }
}
