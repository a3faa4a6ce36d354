// Untrusted text inside hovers and tooltips. Run names, errors, backends, prompts and token texts come from
// run directories that may have been trained elsewhere, so none of them may turn into a link, an image, a
// command URI, a theme icon or a table cell break. Pure, so it is unit-tested.

/** Text that renders as itself in a MarkdownString (also one with supportThemeIcons). */
export function escapeMarkdown(s: string): string {
  return (
    s
      .replace(/[\\`*_{}[\]()#+\-.!|<>~&$]/g, (c) => `\\${c}`)
      // A newline would end a table row or start a block; hovers and tooltips show the text on one line.
      .replace(/\r?\n/g, ' ')
  );
}

/** The longest run of backticks in s. */
function longestTicks(s: string): number {
  let max = 0;
  for (const m of s.matchAll(/`+/g)) max = Math.max(max, m[0].length);
  return max;
}

/** s as inline code, fenced with more backticks than it holds (CommonMark §6.1), on one line. */
export function inlineCode(s: string): string {
  const fence = '`'.repeat(longestTicks(s) + 1);
  const one = s.replace(/\r?\n/g, ' ');
  // A span that starts or ends with a backtick needs a space between it and the fence; CommonMark strips one.
  const pad = /^`|`$/.test(one) || (one.startsWith(' ') && one.endsWith(' ') && one.trim()) ? ' ' : '';
  return `${fence}${pad}${one}${pad}${fence}`;
}

/** s as a fenced code block that s cannot close, whatever backtick runs it holds. */
export function codeBlock(s: string, language = 'text'): string {
  const fence = '`'.repeat(Math.max(3, longestTicks(s) + 1));
  return `\n${fence}${language}\n${s}\n${fence}\n`;
}
