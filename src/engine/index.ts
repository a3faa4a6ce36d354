// Library API (DESIGN §6), bundled as CommonJS dist/engine/index.js. Training calls these same functions.
export { advantages, policyLossAndGrad, aggregationWeights, meanStd } from './grpo';
export { tokenWeights, strategyNames } from './credit';
export { countdownReward } from './tasks/countdown';
export { computeSections, tokenType } from './sections';
export { loadConfig, parseConfigText, configJsonSchema } from './config';
export { expandSweep } from './sweep';
export { train, evaluate, RunController } from './train';
export { evalRun } from './evalrun';
export { readTokenTable, readEpisodeTable } from './arrow_tables';
export { findRunDirs, readRunInfo, readMetrics } from './rundir';
export { analyzeRun, compareRuns } from './analysis';
export { analysisToMarkdown } from './analysis_md';
