"""The Python package's mirrors of the public C structs (python/wgml/_lib.py) against the C
compiler's own layout: a small C program built here from include/*.h prints sizeof and the
offset of every field; each ctypes Structure must give the same size, field names in the same
order, and the same offsets. A field added, removed, reordered or retyped in a header without
the same change in _lib.py fails here (ctypes would otherwise read and write the wrong bytes).
No GPU is used. Usage: test_python_abi.py BUILD_DIR"""
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
os.environ["WGML_LIBRARY"] = os.path.join(BUILD, "libwgml.so")
sys.path.insert(0, os.path.join(ROOT, "python"))
from wgml import _lib  # noqa: E402

# ctypes mirror -> C struct name
MIRRORS = {
    "CtxOptions": "wgml_ctx_options",
    "DeviceInfoC": "wgml_device_info",
    "LlamaConfig": "wgml_llama_config",
    "ModelOptions": "wgml_model_options",
    "Sampler": "wgml_sampler",
    "GenOptions": "wgml_gen_options",
    "GenStats": "wgml_gen_stats",
    "TrainConfig": "wgml_train_config",
    "AdamWConfig": "wgml_adamw_config",
    "CeOptions": "wgml_ce_options",
    "Lora": "wgml_lora",
}


def c_layouts():
    """{struct: (sizeof, [(field, offset)])} from the C compiler, for the fields ctypes names."""
    lines = ['#include "wgml.h"', '#include "wgml-model.h"', '#include "wgml-train.h"', "#include <stddef.h>",
             "#include <stdio.h>", "int main(void) {"]
    for py, c in MIRRORS.items():
        cls = getattr(_lib, py)
        lines.append(f'    printf("S {c} %zu\\n", sizeof({c}));')
        for name, _ in cls._fields_:
            lines.append(f'    printf("F {c} {name} %zu\\n", offsetof({c}, {name}));')
    lines += ["    return 0;", "}"]
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "abi.c"), os.path.join(d, "abi")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), src, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode:
            # a field ctypes names that the header no longer has fails to compile: that is a finding
            print(r.stderr)
            raise SystemExit("FAIL: the C layout program does not compile against include/ (see above)")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    lay = {}
    for line in out.splitlines():
        p = line.split()
        if p[0] == "S":
            lay[p[1]] = [int(p[2]), []]
        else:
            lay[p[1]][1].append((p[2], int(p[3])))
    return lay


def c_field_count(c):
    """The number of members of struct c in the headers (the declarators of the typedef's body;
    a function pointer counts once)."""
    inc = os.path.join(ROOT, "include")
    text = "".join(open(os.path.join(inc, h)).read() for h in sorted(os.listdir(inc)) if h.endswith(".h"))
    end = text.index("} " + c + ";")
    depth, i = 0, end
    while True:  # back to the opening brace of this typedef
        i -= 1
        if text[i] == "}":
            depth += 1
        elif text[i] == "{":
            if depth == 0:
                break
            depth -= 1
    body, stripped, k = text[i + 1:end], [], 0
    while k < len(body):  # drop comments
        if body.startswith("/*", k):
            k = body.index("*/", k) + 2
        elif body.startswith("//", k):
            k = body.index("\n", k)
        else:
            stripped.append(body[k])
            k += 1
    decls = [d for d in "".join(stripped).split(";") if d.strip()]
    return sum(d.count(",") + 1 if "(" not in d else 1 for d in decls)


def main():
    lay = c_layouts()
    failures = passes = 0
    for py, c in MIRRORS.items():
        cls = getattr(_lib, py)
        size, fields = lay[c]
        problems = []
        if ctypes.sizeof(cls) != size:
            problems.append(f"sizeof {ctypes.sizeof(cls)} in Python, {size} in C")
        for (name, off) in fields:
            py_off = getattr(cls, name).offset
            if py_off != off:
                problems.append(f"{name} at {py_off} in Python, {off} in C")
        n_c = c_field_count(c)
        if n_c != len(cls._fields_):
            problems.append(f"{len(cls._fields_)} fields in Python, {n_c} in the header")
        if problems:
            failures += 1
            print(f"FAIL: {py} != {c}: " + "; ".join(problems))
        else:
            passes += 1
            print(f"  ok {py:12s} = {c} ({size} bytes, {len(fields)} fields)")
    print(f"{passes} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
