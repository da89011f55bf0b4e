"""wgml's GGUF reader against files written by PyPI gguf's GGUFWriter.

1. A file with every metadata value type (scalars, strings, arrays of each type, nested
   arrays), general.alignment, and one tensor of every supported type (F32, F16, BF16, Q4_0,
   Q4_1, Q8_0): `tool_model gguf FILE` must print exactly what was written (canonical text:
   values, tensor names, dims, types, offsets, byte counts and a hash of the data). The same
   file as version 2 must read the same.
2. Corrupted variants (truncated at many offsets, huge and wrong counts, huge string lengths,
   bad alignment, unknown value and element types, bad tensor dims/offsets/types, deep nesting,
   duplicate keys, random byte flips): each must end with a clean error (exit code 3, a
   "malformed file" message naming the file offset) or, for random flips, a clean success;
   never a crash (a signal, or a sanitizer report when run from the ASan build).
Usage: test_gguf_reader.py BUILD_DIR"""
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFReader, GGUFValueType as VT, GGUFWriter
from gguf.quants import quantize

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


TYPE_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
              VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string",
              VT.ARRAY: "array", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}


def esc(b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return '"' + "".join(chr(c) if 0x20 <= c < 0x7F and c not in (0x22, 0x5C) else "\\x%02x" % c for c in b) + '"'


def infer(v):
    if isinstance(v, (str, bytes)):
        return VT.STRING
    if isinstance(v, list):
        return VT.ARRAY
    if isinstance(v, bool):
        return VT.BOOL
    if isinstance(v, float):
        return VT.FLOAT32
    return VT.INT32


def fmt(v, t, sub=None):
    """The canonical text tool_model prints for value v of type t."""
    if t == VT.ARRAY:
        et = sub if sub is not None else infer(v[0])
        return TYPE_NAMES[et] + "[" + ",".join(fmt(x, et) for x in v) + "]"
    if t == VT.STRING:
        return esc(v)
    if t == VT.BOOL:
        return "1" if v else "0"
    if t == VT.FLOAT32:
        return "%.9g" % float(np.float32(v))
    if t == VT.FLOAT64:
        return "%.17g" % float(v)
    return str(int(v))


def fnv64(b):
    h = 1469598103934665603
    for c in b:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def fnv64_np(b):
    # vectorised enough for a few hundred KB: plain loop over bytes is fine at these sizes
    return fnv64(bytes(b))


def write_full(path, alignment=64):
    rng = np.random.default_rng(7)
    w = GGUFWriter(path, "testarch")
    kvs = [("general.architecture", "testarch", VT.STRING, None)]
    scalars = [
        ("t.u8", 255, VT.UINT8), ("t.i8", -128, VT.INT8), ("t.u16", 65535, VT.UINT16), ("t.i16", -32768, VT.INT16),
        ("t.u32", 4294967295, VT.UINT32), ("t.i32", -2147483648, VT.INT32), ("t.f32", 3.14159265, VT.FLOAT32),
        ("t.f32neg", -1e-30, VT.FLOAT32), ("t.bool0", False, VT.BOOL), ("t.bool1", True, VT.BOOL),
        ("t.u64", 18446744073709551615, VT.UINT64), ("t.i64", -9223372036854775808, VT.INT64),
        ("t.f64", 2.718281828459045, VT.FLOAT64), ("t.f64big", -1.5e300, VT.FLOAT64),
        ("t.str", "héllo \"wörld\"\n\t\\ 😀", VT.STRING), ("t.str1", "x", VT.STRING),
    ]
    for k, v, t in scalars:
        w.add_key_value(k, v, t)
        kvs.append((k, v, t, None))
    arrays = [
        ("a.u8", [0, 1, 255], VT.UINT8), ("a.i8", [-1, 0, 127], VT.INT8), ("a.u16", [1, 65535], VT.UINT16),
        ("a.i16", [-300, 300], VT.INT16), ("a.u32", [7, 4000000000], VT.UINT32), ("a.i32", [-5, 5, 2**31 - 1], VT.INT32),
        ("a.f32", [0.5, -2.25, 1e10], VT.FLOAT32), ("a.bool", [True, False, True], VT.BOOL),
        ("a.str", ["a", "", "ünï", "sp ace"], VT.STRING), ("a.u64", [0, 2**64 - 1], VT.UINT64),
        ("a.i64", [-(2**63), 2**63 - 1], VT.INT64), ("a.f64", [1e-300, -0.0, 123.456], VT.FLOAT64),
    ]
    for k, v, t in arrays:
        w.add_key_value(k, v, VT.ARRAY, sub_type=t)
        kvs.append((k, v, VT.ARRAY, t))
    nested = [
        ("n.i32", [[1, 2], [3], [4, 5, 6]]),
        ("n.str", [["x", "yy"], ["zzz"]]),
        ("n.deep", [[[1.5, 2.5]], [[-1.0], [3.0, 4.0]]]),
        ("n.mixed", [[True, False], [False]]),
    ]
    for k, v in nested:
        w.add_key_value(k, v, VT.ARRAY, sub_type=VT.ARRAY)
        kvs.append((k, v, VT.ARRAY, VT.ARRAY))
    big = list(range(-1000, 1000))
    w.add_key_value("a.big", big, VT.ARRAY, sub_type=VT.INT32)
    kvs.append(("a.big", big, VT.ARRAY, VT.INT32))
    w.add_custom_alignment(alignment)
    kvs.append(("general.alignment", alignment, VT.UINT32, None))

    tensors = []
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    w.add_tensor("w.f32", f32)
    tensors.append(("w.f32", "F32", [5, 3], f32.tobytes()))
    f16 = rng.standard_normal((7,)).astype(np.float16)
    w.add_tensor("w.f16", f16)
    tensors.append(("w.f16", "F16", [7], f16.tobytes()))
    src = rng.standard_normal((4, 64)).astype(np.float32)
    for name, qt in [("BF16", QT.BF16), ("Q4_0", QT.Q4_0), ("Q4_1", QT.Q4_1), ("Q8_0", QT.Q8_0)]:
        q = quantize(src, qt)
        w.add_tensor("w." + name.lower(), q, raw_shape=q.shape, raw_dtype=qt)
        tensors.append(("w." + name.lower(), name, [64, 4], q.tobytes()))
    s3 = rng.standard_normal((2, 3, 32)).astype(np.float32)
    q = quantize(s3, QT.Q8_0)
    w.add_tensor("w.q8_0_3d", q, raw_shape=q.shape, raw_dtype=QT.Q8_0)
    tensors.append(("w.q8_0_3d", "Q8_0", [32, 3, 2], q.tobytes()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return kvs, tensors


def expected_text(path, kvs, tensors, alignment, version=3):
    r = GGUFReader(path)
    data_offset = r.tensors[0].data_offset - 0 if r.tensors else None
    lines = [f"version {version}", f"alignment {alignment}", f"data_offset {data_offset}"]
    for k, v, t, sub in kvs:
        lines.append(f"kv {k} {TYPE_NAMES[t]} {fmt(v, t, sub)}")
    off = 0
    for name, tname, dims, data in tensors:
        lines.append(f"tensor {name} {tname} [{','.join(map(str, dims))}] offset {off} bytes {len(data)} fnv {fnv64(data):016x}")
        off += (len(data) + alignment - 1) // alignment * alignment
    return "\n".join(lines) + "\n"


def walk(b):
    """Offsets of the fields of a GGUF file (a minimal independent parser for the corruption
    tests): kv entries and tensor infos."""
    pos = 24
    nt, nkv = struct.unpack_from("<QQ", b, 8)
    kvs, tis = [], []

    def value(pos, t):
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        if t in sizes:
            return pos + sizes[t]
        if t == 8:
            (n,) = struct.unpack_from("<Q", b, pos)
            return pos + 8 + n
        et, n = struct.unpack_from("<IQ", b, pos)
        p = pos + 12
        for _ in range(n):
            p = value(p, et)
        return p

    for _ in range(nkv):
        e = {"key_len": pos}
        (kl,) = struct.unpack_from("<Q", b, pos)
        e["key"] = b[pos + 8:pos + 8 + kl].decode()
        pos += 8 + kl
        e["type"] = pos
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        e["value"] = pos
        e["t"] = t
        pos = value(pos, t)
        e["end"] = pos
        kvs.append(e)
    for _ in range(nt):
        e = {"name_len": pos}
        (nl,) = struct.unpack_from("<Q", b, pos)
        pos += 8 + nl
        e["n_dims"] = pos
        (nd,) = struct.unpack_from("<I", b, pos)
        pos += 4
        e["dims"] = pos
        pos += 8 * nd
        e["type"] = pos
        pos += 4
        e["offset"] = pos
        pos += 8
        tis.append(e)
    return kvs, tis, pos


def run_tool(tool, path):
    p = subprocess.run([tool, "gguf", path], capture_output=True)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def expect_error(tool, tmp, name, data, *subs):
    path = os.path.join(tmp, "bad.gguf")
    with open(path, "wb") as f:
        f.write(data)
    rc, out, err = run_tool(tool, path)
    ok = rc == 3 and "malformed file" in err and "offset" in err and all(s in err for s in subs) \
        and "AddressSanitizer" not in err and "runtime error" not in err
    check(ok, f"{name}: want a clean error containing {subs}, got rc {rc}: {err.strip()[:300]}")
    return err


def expect_clean(tool, tmp, name, data):
    path = os.path.join(tmp, "fuzz.gguf")
    with open(path, "wb") as f:
        f.write(data)
    rc, out, err = run_tool(tool, path)
    ok = rc in (0, 3) and "Sanitizer" not in err and "runtime error" not in err
    check(ok, f"{name}: rc {rc} (a crash?) {err.strip()[:300]}")


def p32(b, off, v):
    b = bytearray(b)
    struct.pack_into("<I", b, off, v)
    return bytes(b)


def p64(b, off, v):
    b = bytearray(b)
    struct.pack_into("<Q", b, off, v)
    return bytes(b)


def raw_file(kv_bytes, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, 0, n_kv) + kv_bytes


def rstr(s):
    s = s.encode()
    return struct.pack("<Q", len(s)) + s


def check_real_model(tool):
    """The installed model: every key, value and tensor info as GGUFReader reads them."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    model = os.path.join(root, ".deps", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(model):
        check(False, f"{model} missing: run scripts/setup.sh")
        return
    t0 = time.time()
    r = GGUFReader(model)
    lines = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = f.types[0]
        if t == VT.ARRAY:
            et = f.types[1]
            if et == VT.STRING:
                vals = [esc(bytes(f.parts[i])) for i in f.data]
            else:
                vals = [fmt(f.parts[i][0].item(), et) for i in f.data]
            lines.append(f"kv {name} array {TYPE_NAMES[et]}[{','.join(vals)}]")
        elif t == VT.STRING:
            lines.append(f"kv {name} string {esc(bytes(f.parts[f.data[0]]))}")
        else:
            lines.append(f"kv {name} {TYPE_NAMES[t]} {fmt(f.parts[f.data[0]][0].item(), t)}")
    data_off = min(t.data_offset for t in r.tensors) if r.tensors else 0
    for t in r.tensors:
        dims = ",".join(str(int(d)) for d in t.shape)
        lines.append(f"tensor {t.name} {t.tensor_type.name} [{dims}] offset {t.data_offset - data_off} bytes {t.n_bytes}")
    rc, out, err = run_tool(tool, model)
    got = [(" ".join(l.split(" ")[:-2]) if l.startswith("tensor ") else l) for l in out.splitlines()[3:]]
    check(rc == 0 and got == lines and out.splitlines()[2] == f"data_offset {data_off}",
          f"the model's metadata and tensor infos differ from GGUFReader's: {err}")
    if got != lines:
        for a, b in zip(got, lines):
            if a != b:
                print("  wgml:", a[:200], "\n  want:", b[:200])
                break
    print(f"real model: {len(lines)} keys and tensors match GGUFReader ({time.time() - t0:.1f} s)")


def main():
    build = sys.argv[1]
    tool = os.path.join(build, "tests", "tool_model")
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "full.gguf")
        kvs, tensors = write_full(path, alignment=64)
        want = expected_text(path, kvs, tensors, 64)
        rc, out, err = run_tool(tool, path)
        check(rc == 0 and out == want, "full file: canonical dump differs")
        if out != want:
            for a, b in zip(out.splitlines(), want.splitlines()):
                if a != b:
                    print("  wgml:", a[:300], "\n  want:", b[:300])
            print(err)
        good = open(path, "rb").read()
        print(f"full file: {len(good)} bytes, {len(kvs)} keys, {len(tensors)} tensors: {'ok' if out == want else 'DIFFERS'}")

        # version 2 has the same layout
        v2 = p32(good, 4, 2)
        with open(path + ".v2", "wb") as f:
            f.write(v2)
        rc, out2, err = run_tool(tool, path + ".v2")
        check(rc == 0 and out2 == want.replace("version 3", "version 2", 1), "version 2 file")

        # default alignment (32) and a file without tensors
        p2 = os.path.join(tmp, "a32.gguf")
        kvs2, tensors2 = write_full(p2, alignment=32)
        rc, out, err = run_tool(tool, p2)
        check(rc == 0 and out == expected_text(p2, kvs2, tensors2, 32), "alignment 32 file")
        p3 = os.path.join(tmp, "empty.gguf")
        w = GGUFWriter(p3, "x")
        w.add_uint32("x.n", 5)
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
        rc, out, err = run_tool(tool, p3)
        check(rc == 0 and 'kv general.architecture string "x"\nkv x.n u32 5\n' in out, f"no tensors: {out} {err}")
        # an empty array (GGUFWriter refuses to write one; made by hand)
        e = raw_file(rstr("e.arr") + struct.pack("<IIQ", 9, 4, 0) + rstr("e.s") + struct.pack("<I", 8) + rstr(""), 2)
        with open(os.path.join(tmp, "e.gguf"), "wb") as f:
            f.write(e)
        rc, out, err = run_tool(tool, os.path.join(tmp, "e.gguf"))
        check(rc == 0 and 'kv e.arr array u32[]\nkv e.s string ""\n' in out, f"empty array and string: {out} {err}")

        kv, ti, end_ti = walk(good)
        r = GGUFReader(path)
        data_off = r.tensors[0].data_offset
        last_end = max(t.data_offset + t.n_bytes for t in r.tensors)

        # truncated at every offset of the header and at many in the data
        cuts = list(range(0, 1200)) + list(range(1200, data_off + 1, 37)) + [data_off] + \
            list(range(data_off + 1, last_end, max(1, (last_end - data_off) // 60)))
        cuts += [last_end - 1]
        t1 = time.time()
        nfail = failures
        for c in cuts:
            expect_error(tool, tmp, f"truncated at {c}", good[:c])
        print(f"truncations: {len(cuts)} files in {time.time() - t1:.1f} s, {failures - nfail} not clean")

        def kvat(key):
            return next(e for e in kv if e["key"] == key)

        # bad counts
        expect_error(tool, tmp, "huge tensor count", p64(good, 8, 2**63), "tensor count")
        expect_error(tool, tmp, "huge kv count", p64(good, 16, 2**64 - 1), "metadata count")
        expect_error(tool, tmp, "kv count one too many", p64(good, 16, len(kv) + 1))
        expect_error(tool, tmp, "tensor count one too many", p64(good, 8, len(ti) + 1))
        a = kvat("a.big")
        expect_error(tool, tmp, "huge array count", p64(good, a["value"] + 4, 2**62), "array count")
        expect_error(tool, tmp, "array count past the end", p64(good, a["value"] + 4, (len(good) - a["value"]) // 4 + 1), "array count")
        n = kvat("n.str")
        expect_error(tool, tmp, "nested array huge count", p64(good, n["value"] + 12 + 4, 2**40), "array count")
        # huge lengths
        expect_error(tool, tmp, "huge key length", p64(good, kv[1]["key_len"], 2**64 - 1), "string length")
        expect_error(tool, tmp, "key length past end", p64(good, kv[1]["key_len"], len(good)), "string length")
        s = kvat("t.str")
        expect_error(tool, tmp, "huge string value length", p64(good, s["value"], 2**63 + 5), "string length")
        expect_error(tool, tmp, "huge tensor name length", p64(good, ti[0]["name_len"], 2**64 - 8), "string length")
        # alignment
        al = kvat("general.alignment")
        expect_error(tool, tmp, "alignment 3", p32(good, al["value"], 3), "general.alignment")
        expect_error(tool, tmp, "alignment 0", p32(good, al["value"], 0), "general.alignment")
        expect_error(tool, tmp, "alignment as i32", p32(good, al["type"], 5), "general.alignment")
        expect_error(tool, tmp, "alignment 128 (offsets no longer aligned)", p32(good, al["value"], 128), "alignment 128")
        # unknown types
        expect_error(tool, tmp, "unknown value type 13", p32(good, kvat("t.u32")["type"], 13), "unknown value type 13")
        expect_error(tool, tmp, "unknown value type 0xffffffff", p32(good, kvat("t.u8")["type"], 0xFFFFFFFF), "unknown value type")
        expect_error(tool, tmp, "unknown array element type", p32(good, a["value"], 77), "unknown array element type 77")
        expect_error(tool, tmp, "bool 2", bytes(good[:kvat("t.bool1")["value"]]) + b"\x02" + good[kvat("t.bool1")["value"] + 1:], "bool")
        # header
        expect_error(tool, tmp, "bad magic", b"GGUG" + good[4:], "magic")
        expect_error(tool, tmp, "version 1", p32(good, 4, 1), "version 1")
        expect_error(tool, tmp, "version 4", p32(good, 4, 4), "version 4")
        expect_error(tool, tmp, "big-endian version", p32(good, 4, 0x03000000), "big-endian")
        expect_error(tool, tmp, "empty file", b"", "magic")
        # tensor infos
        expect_error(tool, tmp, "n_dims 0", p32(good, ti[0]["n_dims"], 0), "dimensions")
        expect_error(tool, tmp, "n_dims 5", p32(good, ti[0]["n_dims"], 5), "dimensions")
        expect_error(tool, tmp, "n_dims huge", p32(good, ti[0]["n_dims"], 0xFFFFFFFF), "dimensions")
        d = p64(good, ti[0]["dims"], 2**40)
        expect_error(tool, tmp, "dims overflow", p64(d, ti[0]["dims"] + 8, 2**40), "overflow")
        expect_error(tool, tmp, "dim 2^63", p64(good, ti[0]["dims"], 2**63), "overflow")
        expect_error(tool, tmp, "dims past the end", p64(good, ti[-1]["dims"], 2**20), "past the end")
        expect_error(tool, tmp, "Q4_0 dim not a multiple of 32", p64(good, ti[3]["dims"], 48), "block size")
        expect_error(tool, tmp, "offset misaligned", p64(good, ti[1]["offset"], 64 + 8), "alignment")
        expect_error(tool, tmp, "offset past the end", p64(good, ti[1]["offset"], 2**62), "past the end")
        expect_error(tool, tmp, "offset 2^64-64", p64(good, ti[1]["offset"], 2**64 - 64), "past the end")
        expect_error(tool, tmp, "unsupported tensor type 16 (IQ2_XXS)", p32(good, ti[0]["type"], 16), "unsupported tensor type 16", "w.f32")
        expect_error(tool, tmp, "unsupported tensor type 1234", p32(good, ti[0]["type"], 1234), "unsupported tensor type 1234")
        dup = bytearray(good)
        k2 = kvat("t.i8")
        dup[k2["key_len"] + 8:k2["key_len"] + 8 + 4] = b"t.u8"
        expect_error(tool, tmp, "duplicate key", bytes(dup), "duplicate metadata key 't.u8'")
        dupt = bytearray(good)
        nm = ti[1]["name_len"]
        dupt[nm + 8:nm + 8 + 5] = b"w.f32"  # "w.f16" -> "w.f32"
        expect_error(tool, tmp, "duplicate tensor", bytes(dupt), "duplicate tensor name 'w.f32'")
        # deep nesting (made by hand)
        deep = struct.pack("<I", 9)
        for _ in range(40):
            deep += struct.pack("<IQ", 9, 1)
        deep += struct.pack("<IQ", 4, 1) + struct.pack("<I", 1)
        expect_error(tool, tmp, "arrays nested 40 deep", raw_file(rstr("deep") + deep, 1), "nested deeper")
        expect_error(tool, tmp, "empty key", raw_file(rstr("") + struct.pack("<IB", 0, 1), 1), "empty")

        # random byte flips in the header: a clean error or a clean success, never a crash
        rng = random.Random(int(os.environ.get("WGML_SEED", "99")))
        for i in range(300):
            b = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(0, end_ti)
                b[pos] = rng.choice([0, 0xFF, 0x7F, 0x80, rng.randrange(256)])
            expect_clean(tool, tmp, f"flip {i}", bytes(b))
    check_real_model(tool)
    print(f"{passes} passed, {failures} failed ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
