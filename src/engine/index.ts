// Library API (design.md#library-api), bundled as CommonJS dist/engine/index.js. Training calls these same functions.
export { policyLossAndGrad, aggregationWeights } from './train/grpo';
export { advantages } from './credit/advantages';
export { meanStd } from './core/stats';
export { tokenWeights, strategyNames } from './credit';
export { countdownReward } from './tasks/countdown';
export { computeSections, tokenType } from './tasks/sections';
export { loadConfig, parseConfigText, configJsonSchema } from './config/config';
export { expandSweep } from './sweep/sweep';
export { train, evaluate, RunController } from './train/train';
export { evalRun } from './train/evalrun';
export { readTokenTable, readEpisodeTable } from './rundir/arrow_tables';
export { findRunDirs, readRunInfo, readMetrics } from './rundir/rundir';
export { analyzeRun, compareRuns } from './analysis/analysis';
export { analysisToMarkdown } from './analysis/markdown';
