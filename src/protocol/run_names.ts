// How a run is named on screen: the tree, tab titles and chart legends say the same short thing. A run's folder is
// `<name>-YYYYMMDD-HHMMSS` (design.md#run-directory); its name alone is what the researcher chose, and the sweep's
// shared part of a name adds nothing beside its siblings.

/**
 * The names a config's runs are shown by: each without the part every run of the config shares, cut at a '-' (a
 * sweep's runs are named `<config>-<strategy and values>`, so "countdown-short-entropy_mask-mp80-seed2" shows as
 * "entropy_mask-mp80-seed2"); a config with one name keeps it whole.
 */
export function shortRunNames(names: readonly string[]): string[] {
  const distinct = [...new Set(names)];
  if (distinct.length < 2) return [...names];
  let prefix = distinct[0];
  for (const n of distinct) while (prefix && !n.startsWith(prefix)) prefix = prefix.slice(0, -1);
  prefix = prefix.slice(0, prefix.lastIndexOf('-') + 1);
  return names.map((n) => n.slice(prefix.length) || n);
}

const STAMPED = /^(.+)-(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})$/;

/**
 * A run folder's name for a tab: "tiny 12:51" for `tiny-20261129-125107`, with the day too ("tiny 28 Nov 12:51")
 * when `withDay`. A folder not named by the engine (an import's own name) is kept whole.
 */
export function runTabName(folder: string, { withDay = false } = {}): string {
  const m = STAMPED.exec(folder);
  if (!m) return folder;
  const [, name, , month, day, hh, mm] = m;
  const monthName = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'][Number(month) - 1] ?? month;
  return withDay ? `${name} ${Number(day)} ${monthName} ${hh}:${mm}` : `${name} ${hh}:${mm}`;
}

/**
 * The legend names of runs shown together: their names without the shared part when the names tell them apart, else
 * their folders' names with the time the run started (with the day when the times clash), else the folders.
 */
export function runLegendNames(runs: readonly { id: string; name: string }[]): string[] {
  const distinct = (xs: string[]) => new Set(xs).size === xs.length;
  const names = runs.map((r) => r.name);
  if (distinct(names)) return shortRunNames(names);
  for (const withDay of [false, true]) {
    const stamped = runs.map((r) => runTabName(r.id, { withDay }));
    if (distinct(stamped)) return stamped;
  }
  return runs.map((r) => r.id);
}
