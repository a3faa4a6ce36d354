// Text helpers shared by the config's did-you-mean (config/suggest.ts) and the CLI's flag suggestions (cli/args.ts).

/** Edit distance (insertions, deletions, substitutions, unit costs) between a and b, two rows of the DP table. */
export function levenshtein(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}
