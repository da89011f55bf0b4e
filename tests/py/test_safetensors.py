"""wgml's safetensors files against the format's specification, with json + struct only (the
`safetensors` package is not available here).

1. test_checkpoint writes a sample (WGML_ST_SAMPLE=PATH): this script parses it by the spec:
   an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object; optional
   "__metadata__" of string values; per tensor "dtype", "shape", "data_offsets" [begin, end)
   relative to the byte buffer after the header), tensors tiling the buffer with no hole or
   overlap and nothing after it; then checks the values test_checkpoint put in.
2. This script writes a file by the spec (its own header layout: key order, spacing, padding)
   and test_checkpoint (WGML_ST_READ=PATH) must read its tensors and metadata.
Usage: test_safetensors.py BUILD_DIR"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
         "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
NP = {"F32": "<f4", "I32": "<i4", "U8": "u1"}


def parse(path):
    """Reads a safetensors file strictly by the spec; returns (metadata, {name: array})."""
    data = open(path, "rb").read()
    assert len(data) >= 8, "shorter than the header length"
    (n,) = struct.unpack("<Q", data[:8])
    assert 8 + n <= len(data), "header past the end"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    assert isinstance(header, dict)
    buf = data[8 + n:]
    meta = header.pop("__metadata__", {})
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()), "metadata must be strings"
    spans, out = [], {}
    for name, info in header.items():
        assert set(info) == {"dtype", "shape", "data_offsets"}, name
        b, e = info["data_offsets"]
        size = SIZES[info["dtype"]]
        numel = int(np.prod(info["shape"], dtype=np.int64)) if info["shape"] else 1
        assert e - b == numel * size, name
        spans.append((b, e))
        out[name] = np.frombuffer(buf[b:e], dtype=NP[info["dtype"]]).reshape(info["shape"])
    at = 0
    for b, e in sorted(spans):
        assert b == at, "hole or overlap"
        at = e
    assert at == len(buf), "bytes after the last tensor"
    return n, meta, out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    exe = os.path.join(build, "tests", "test_checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        sample = os.path.join(tmp, "sample.safetensors")
        r = subprocess.run([exe], env=dict(os.environ, WGML_ST_SAMPLE=sample), capture_output=True, text=True)
        check(r.returncode == 0, "test_checkpoint writing the sample: " + r.stdout[-500:] + r.stderr[-500:])
        try:
            n, meta, t = parse(sample)
            check(n % 8 == 0, "header length is a multiple of 8")
            check(meta == {"step": "12", "note": "line\nbreak \u00e9"}, "metadata %r" % meta)
            check(list(t) == ["layer.a", 'b "quoted"', "scalar"], "tensor names %r" % list(t))
            check(t["layer.a"].shape == (2, 3) and np.array_equal(t["layer.a"].ravel(), 0.5 * np.arange(6, dtype=np.float32) - 1),
                  "F32 [2,3] values")
            check(np.array_equal(t['b "quoted"'], -7 * np.arange(4, dtype=np.int32)), "I32 [4] values")
            check(t["scalar"].shape == () and int(t["scalar"]) == 200, "rank-0 U8 value")
        except Exception as e:  # noqa: BLE001
            check(False, "parse the sample by the spec: %r" % e)

        # a file written here, with another header layout: sorted keys, spaces, metadata last
        w = np.arange(6, dtype=np.float32).reshape(3, 2) * 0.25
        ids = 1000 - np.arange(5, dtype=np.int32)
        header = {"ids": {"dtype": "I32", "shape": [5], "data_offsets": [24, 44]},
                  "w": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]},
                  "__metadata__": {"origin": "python"}}
        h = json.dumps(header, indent=1, sort_keys=True).encode()
        h += b" " * (-len(h) % 8)
        mine = os.path.join(tmp, "mine.safetensors")
        with open(mine, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + w.tobytes() + ids.tobytes())
        r = subprocess.run([exe], env=dict(os.environ, WGML_ST_READ=mine), capture_output=True, text=True)
        check(r.returncode == 0 and "0 failed" in r.stdout, "wgml reads the Python-written file: " + r.stdout[-800:] + r.stderr[-300:])
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
