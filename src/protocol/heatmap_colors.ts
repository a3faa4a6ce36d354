// The heatmap's colours, one palette for every view that paints tokens: the editor's decorations
// (extension/heatmap/scales.ts) and Browse Rollouts' Group view (webviews/browse.main.ts). Pure data.

export type Rgb = readonly [number, number, number];
export type ThemeKind = 'light' | 'dark' | 'highContrast' | 'highContrastLight';

// Red for "down", blue for "up" (a red–blue diverging scale reads for the common red–green colour blindness); violet
// for sequential metrics, so a glance tells which kind of scale is showing. Darker hues on light backgrounds, brighter
// and more opaque ones on dark backgrounds, where the same colour would look muddy and faint.
export const HEATMAP_HUES: Record<'negative' | 'positive' | 'sequential', { light: Rgb; dark: Rgb }> = {
  negative: { light: [207, 34, 46], dark: [255, 92, 84] },
  // an indigo-leaning blue (hue about 228°), apart from the editor's selection, which both default themes tint azure
  // (about 210°): a faint "up" must not read as selected text
  positive: { light: [29, 64, 200], dark: [110, 140, 255] },
  sequential: { light: [130, 80, 223], dark: [178, 128, 255] },
};

/**
 * The faintest and the strongest tint's opacity. The text keeps the theme's foreground colour over the tint, so the
 * strongest stays light enough to read it (0.56 on light themes, 0.72 on dark: on a dark background a tint of the same
 * opacity reads fainter). High-contrast themes put white or black text on pure black or white: a lower ceiling keeps
 * that contrast.
 */
export function tintRange(theme: ThemeKind): [number, number] {
  return theme === 'highContrast' || theme === 'highContrastLight' ? [0.15, 0.4] : theme === 'dark' ? [0.2, 0.72] : [0.12, 0.56];
}

export const rgba = ([r, g, b]: Rgb, a: number): string => `rgba(${r}, ${g}, ${b}, ${a})`;
