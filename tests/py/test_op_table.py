"""The elementwise op tables (include/wgml.h: WGML_UNARY_OPS, WGML_BINARY_OPS, WGML_COMPARE_OPS;
src/ops/elementwise/ew_ops.h: the kernel-only rows) against what is made from them and what
is written by hand beside them:
- the rows, read by a small C program built here from the headers (the C compiler expands the
  X-macros), keep the ABI: the public values are 0 .. n-1 in row order, and the rows of
  ABI_ROWS below (the values released so far) keep their names and values;
- every kernel that switches on a family has exactly one `case` per row it computes, by the
  row's WGSL constant (ew_unary.wgsl: UN_RELU ...): a row added without its case, or a case
  left for a row removed, fails here (the kernel's `default` computes nothing);
- the Python package's op names (wgml.core.UNARY_OPS etc., read from libwgml.so) are the
  table's, and every unary op is a Graph method;
- a self-test: a kernel source with one case removed must fail the case check.
No GPU is used. Usage: test_op_table.py BUILD_DIR"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
EW = os.path.join(ROOT, "src", "ops", "elementwise")

# The public values released so far (ABI): a row may be added after these, never changed.
ABI_ROWS = {
    "U": ["relu", "sigmoid", "silu", "gelu", "gelu_tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt", "tanh",
          "floor", "ceil", "trunc", "round", "sin", "cos", "expm1"],
    "B": ["add", "sub", "mul", "div", "minimum", "maximum", "pow", "div_trunc", "div_floor"],
    "C": ["eq", "ne", "lt", "le", "gt", "ge"],
}


def table_rows():
    """[(family, NAME, name, value, i32)] from the C preprocessor; family U, B, C (public) or
    UK, CK (kernel-only rows of ew_unary and ew_bool)."""
    src = r'''#include "ops/elementwise/ew_ops.h"
#include <stdio.h>
#define U_(NAME, name, value) printf("U %s %s %d 0\n", #NAME, #name, value);
#define UK_(NAME, name, value) printf("UK %s %s %d 0\n", #NAME, #name, value);
#define C_(NAME, name, value) printf("C %s %s %d 0\n", #NAME, #name, value);
#define CK_(NAME, name, value) printf("CK %s %s %d 0\n", #NAME, #name, value);
#define B_(NAME, name, value, i32) printf("B %s %s %d %d\n", #NAME, #name, value, i32);
int main(void) {
    WGML_UNARY_OPS(U_) EW_UNARY_KERNEL_OPS(UK_) WGML_COMPARE_OPS(C_) EW_BOOL_KERNEL_OPS(CK_) WGML_BINARY_OPS(B_)
    return 0;
}
'''
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, "rows.c"), os.path.join(d, "rows")
        with open(c, "w") as f:
            f.write(src)
        r = subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "src"), c,
                            "-o", exe], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            raise SystemExit("FAIL: the table program does not compile against include/ and src/ (see above)")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        fam, big, small, value, i32 = line.split()
        rows.append((fam, big, small, int(value), int(i32)))
    return rows


def check_abi(rows, problems):
    for fam, want in ABI_ROWS.items():
        got = [(r[2], r[3]) for r in rows if r[0] == fam]
        if [v for _, v in got] != list(range(len(got))):
            problems.append(f"{fam}: public values {[v for _, v in got]} are not 0 .. n-1 in row order")
        for i, name in enumerate(want):
            if i >= len(got) or got[i] != (name, i):
                problems.append(f"{fam}: value {i} must stay {name} (ABI), the table has {got[i] if i < len(got) else None}")


def cases_of(text):
    """The constants named in the `case` selectors of a WGSL source (comments dropped)."""
    text = re.sub(r"//[^\n]*", "", text)
    names = []
    for sel in re.findall(r"\bcase\s+([^:{]+)[:{]", text):
        names += [s.strip() for s in sel.split(",") if s.strip() and s.strip() != "default"]
    return names


def check_cases(kernel, text, want, problems):
    got = cases_of(text)
    dup = sorted({n for n in got if got.count(n) > 1})
    if dup:
        problems.append(f"{kernel}: cases repeated: {dup}")
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if missing:
        problems.append(f"{kernel}: no case for the rows {missing}")
    if extra:
        problems.append(f"{kernel}: cases without a row {extra}")


def kernel_wants(rows):
    un = ["UN_" + r[1] for r in rows if r[0] in ("U", "UK")]
    return {
        "ew_unary": un,
        # the derivatives (ew_unary_bwd's and ew_glu_bwd's): round to decimals has round's zero
        # gradient, its rule asks for UN_ROUND (elementwise_grad.c)
        "ew_unary_df": [n for n in un if n != "UN_ROUND_DEC"],
        "ew_binary": ["BIN_" + r[1] for r in rows if r[0] == "B"],
        "ew_binary_int": ["BIN_" + r[1] for r in rows if r[0] == "B" and r[4]],
        "ew_bool": ["CMP_" + r[1] for r in rows if r[0] == "C"] + ["BOOL_" + r[1] for r in rows if r[0] == "CK"],
    }


def check_python(rows, problems):
    os.environ["WGML_LIBRARY"] = os.path.join(BUILD, "libwgml.so")
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from wgml import core  # noqa: E402
    for fam, got in (("U", core.UNARY_OPS), ("B", core.BINARY_OPS), ("C", core.COMPARE_OPS)):
        want = [r[2] for r in sorted((r for r in rows if r[0] == fam), key=lambda r: r[3])]
        if got != want:
            problems.append(f"Python {fam} names {got} are not the table's {want}")
    for name in core.UNARY_OPS:
        if not callable(getattr(core.Graph, name, None)):
            problems.append(f"Python: Graph has no method {name}")


def main():
    rows = table_rows()
    problems = []
    check_abi(rows, problems)
    wants = kernel_wants(rows)
    for kernel, want in wants.items():
        with open(os.path.join(EW, kernel + ".wgsl")) as f:
            check_cases(kernel, f.read(), want, problems)
    check_python(rows, problems)
    # self-test: the unary kernel without its expm1 case must be reported
    with open(os.path.join(EW, "ew_unary.wgsl")) as f:
        text = f.read()
    planted = []
    check_cases("ew_unary", re.sub(r"\n\s*case UN_EXPM1:[^\n]*", "", text), wants["ew_unary"], planted)
    if not any("UN_EXPM1" in p for p in planted):
        problems.append("self-test: a removed case UN_EXPM1 was not reported")
    n = {f: sum(r[0] == f for r in rows) for f in ("U", "UK", "B", "C", "CK")}
    print(f"rows: {n['U']} unary (+{n['UK']} kernel-only), {n['B']} binary, {n['C']} comparisons (+{n['CK']} logical)")
    for p in problems:
        print("FAIL:", p)
    if problems:
        sys.exit(1)
    print("op tables: ABI, kernel cases and Python names agree")


if __name__ == "__main__":
    main()
