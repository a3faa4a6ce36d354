// The extension's base types: named by the settings and the command arguments below the heatmap, and by the heatmap
// itself, so they sit beneath both.

/** One episode of one logged step of a run. */
export interface EpisodeRef {
  runDir: string;
  step: number;
  episode: number;
}

/** Where a heatmap's colour scale is taken: the episode's own values, or its whole step's. */
export type Normalization = 'episode' | 'step';
