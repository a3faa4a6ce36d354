// The metric sinks, by their `logging.<key>` setting: the whole list. A new sink is a file in this folder and a line
// here; the config's logging section and RunTrackers take it from this list.
import type { z } from 'zod';
import type { SinkSpec } from '../sink';
import { mlflowSink } from './mlflow';
import { tensorboardSink } from './tensorboard';

export const METRIC_SINKS = [tensorboardSink, mlflowSink] as const satisfies readonly SinkSpec<string, z.ZodType>[];

type Entry = (typeof METRIC_SINKS)[number];

/** The logging section's keys for the sinks, each with its schema. */
export function sinkShape() {
  return Object.fromEntries(METRIC_SINKS.map((s) => [s.key, s.schema])) as { [E in Entry as E['key']]: E['schema'] };
}
