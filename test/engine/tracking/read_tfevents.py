#!/usr/bin/env python3
"""Reads TensorBoard event files the way TensorBoard does, written independently of src/engine/tracking/tensorboard.ts
(standard library only): TFRecord framing with every masked CRC-32C checked (a bitwise CRC here, not a table), a
generic protobuf wire-format decoder, and the Event / Summary / HistogramProto field numbers of tensorboard's
event.proto, summary.proto and histogram.proto.

usage: read_tfevents.py <folder>   prints JSON: {"files": [...], "events": [...], "series": {tag: [[step, value]...]},
"histograms": {tag: [[step, {...}]...]}, "out_of_order": n}. A run folder is read as TensorBoard reads one: files in name
order; a SessionLog START at step s drops every value at step >= s read before it; a summary whose step is below the
newest step read drops that tag's values from there (TensorBoard's purge of orphaned data). Any bad CRC, truncated
record or malformed message exits 1 with the reason."""
import json
import os
import struct
import sys


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path: str):
    with open(path, "rb") as f:
        buf = f.read()
    at = 0
    while at < len(buf):
        if at + 12 > len(buf):
            raise ValueError(f"{path}: truncated record header at byte {at}")
        header = buf[at : at + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", buf[at + 8 : at + 12])
        if hcrc != masked(header):
            raise ValueError(f"{path}: bad length CRC at byte {at}")
        data = buf[at + 12 : at + 12 + length]
        if len(data) != length or at + 16 + length > len(buf):
            raise ValueError(f"{path}: truncated record at byte {at}")
        (dcrc,) = struct.unpack("<I", buf[at + 12 + length : at + 16 + length])
        if dcrc != masked(data):
            raise ValueError(f"{path}: bad data CRC at byte {at}")
        yield data
        at += 16 + length


def varint(b: bytes, at: int):
    shift = 0
    out = 0
    while True:
        if at >= len(b):
            raise ValueError("truncated varint")
        x = b[at]
        at += 1
        out |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return out, at


def fields(b: bytes):
    """(field number, wire type, value) in order; value is int, bytes, or the raw 4/8 bytes."""
    at = 0
    while at < len(b):
        key, at = varint(b, at)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(b, at)
        elif wire == 1:
            v, at = b[at : at + 8], at + 8
        elif wire == 2:
            n, at = varint(b, at)
            v, at = b[at : at + n], at + n
            if len(v) != n:
                raise ValueError("truncated length-delimited field")
        elif wire == 5:
            v, at = b[at : at + 4], at + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield field, wire, v


def f64(raw: bytes) -> float:
    return struct.unpack("<d", raw)[0]


def f32(raw: bytes) -> float:
    return struct.unpack("<f", raw)[0]


def histogram(b: bytes) -> dict:
    h = {"min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0, "sum_squares": 0.0, "bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for field, wire, v in fields(b):
        if field in names and wire == 1:
            h[names[field]] = f64(v)
        elif field in (6, 7):
            key = "bucket_limit" if field == 6 else "bucket"
            if wire == 2:  # packed
                h[key].extend(struct.unpack(f"<{len(v) // 8}d", v))
            else:
                h[key].append(f64(v))
    return h


def summary_value(b: bytes) -> dict:
    out = {}
    for field, wire, v in fields(b):
        if field == 1:
            out["tag"] = v.decode("utf-8")
        elif field == 2 and wire == 5:
            out["simple_value"] = f32(v)
        elif field == 5:
            out["histo"] = histogram(v)
        elif field == 9:
            out["metadata"] = True
    return out


def event(b: bytes) -> dict:
    e = {"wall_time": 0.0, "step": 0}
    for field, wire, v in fields(b):
        if field == 1 and wire == 1:
            e["wall_time"] = f64(v)
        elif field == 2 and wire == 0:
            e["step"] = v
        elif field == 3:
            e["file_version"] = v.decode("utf-8")
        elif field == 5:
            e["summary"] = [summary_value(x) for f, _, x in fields(v) if f == 1]
        elif field == 7:
            status = 0
            for f, _, x in fields(v):
                if f == 1:
                    status = x
            e["session_log"] = status
    return e


def read_folder(folder: str) -> dict:
    files = sorted(n for n in os.listdir(folder) if "tfevents" in n)
    events = []
    series: dict = {}
    histos: dict = {}
    out_of_order = 0
    newest = -1
    for name in files:
        first = True
        for rec in records(os.path.join(folder, name)):
            e = event(rec)
            e["file"] = name
            events.append(e)
            if first:
                if e.get("file_version") != "brain.Event:2":
                    raise ValueError(f"{name}: first record is not file_version brain.Event:2: {e}")
                first = False
            if e.get("session_log") == 1:  # START: a restart; drop what was written at or after its step
                for store in (series, histos):
                    for tag in store:
                        store[tag] = [p for p in store[tag] if p[0] < e["step"]]
                newest = e["step"] - 1
            if "summary" in e:
                if e["step"] < newest:
                    out_of_order += 1
                    for v in e["summary"]:
                        for store in (series, histos):
                            if v["tag"] in store:
                                store[v["tag"]] = [p for p in store[v["tag"]] if p[0] < e["step"]]
                newest = max(newest, e["step"])
                for v in e["summary"]:
                    if "simple_value" in v:
                        series.setdefault(v["tag"], []).append([e["step"], v["simple_value"]])
                    if "histo" in v:
                        histos.setdefault(v["tag"], []).append([e["step"], v["histo"]])
    return {"files": files, "events": events, "series": series, "histograms": histos, "out_of_order": out_of_order}


if __name__ == "__main__":
    try:
        print(json.dumps(read_folder(sys.argv[1])))
    except (ValueError, OSError) as err:
        print(str(err), file=sys.stderr)
        sys.exit(1)
