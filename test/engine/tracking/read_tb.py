#!/usr/bin/env python3
"""Reads a TensorBoard log folder with TensorBoard's own reader (tensorboard.backend.event_processing's
EventAccumulator, every event kept: size_guidance 0), as TensorBoard's server loads a run: its purge of orphaned
data after a restart included.

usage: read_tb.py <folder>   prints JSON: {"series": {tag: [[step, value]...]}, "histograms": {tag: [[step, {"min",
"max", "num", "sum", "sum_squares", "bucket_limit", "bucket"}]...]}}"""
import json
import sys

from tensorboard.backend.event_processing.event_accumulator import HISTOGRAMS, SCALARS, EventAccumulator


def main(folder: str) -> dict:
    acc = EventAccumulator(folder, size_guidance={SCALARS: 0, HISTOGRAMS: 0}, purge_orphaned_data=True)
    acc.Reload()
    tags = acc.Tags()
    series = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in tags.get("scalars", [])}
    histograms = {
        t: [
            [
                e.step,
                {
                    "min": e.histogram_value.min,
                    "max": e.histogram_value.max,
                    "num": e.histogram_value.num,
                    "sum": e.histogram_value.sum,
                    "sum_squares": e.histogram_value.sum_squares,
                    "bucket_limit": list(e.histogram_value.bucket_limit),
                    "bucket": list(e.histogram_value.bucket),
                },
            ]
            for e in acc.Histograms(t)
        ]
        for t in tags.get("histograms", [])
    }
    return {"series": series, "histograms": histograms}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
