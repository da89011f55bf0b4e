"""`wgml run FILE.pte` end to end on the valid programs of the seed corpus (fuzz/corpus/pte):
good_mlp (a Vulkan-delegated MLP with two outputs) and good_embedding_int64 (an int64 input
given as a .npy file), on the GPU the tests use (lavapipe here).

1. --out into a folder that does not exist yet, three levels deep: made, the outputs written;
   --out where a file is in the way: exit 1 naming the folder.
2. --check against the outputs just written: exit 0, "ok", 0 elements over tolerance.
3. --check against a copy with one element moved past the tolerance: exit 1, the line names
   the output and prints the error (max abs error = the move, 1 element over); the other
   output is still checked. The same copy passes with --atol or --rtol wide enough, and a move
   within the default tolerance (atol 1e-4 + rtol 1e-4 |ref|) passes without options.
4. A NaN or an infinity in the reference where the output is finite: exit 1.
5. A reference of another shape, or one that is missing: exit 1 with a message naming both.
6. --atol / --rtol that are not a number >= 0: exit 2 with a usage message naming the value.
7. A program with an operator wgml lacks (good_mlp with relu renamed to a name no registry has):
   exit 1 naming it; the portable-kernel program good_portable_mlp (cumsum, argmax) runs.
Usage: test_run_cli.py BUILD_DIR"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

failures = 0
passes = 0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "fuzz", "corpus", "pte")
ATOL = RTOL = 1e-4  # tools/run.c's defaults


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def run(wgml, args):
    r = subprocess.run([wgml, "run"] + args, capture_output=True, text=True, errors="replace", timeout=600)
    return r.returncode, r.stdout + r.stderr


def check_line(out, k):
    """The --check line of output k, or ''."""
    m = re.search(r"^check output %d against .*$" % k, out, re.M)
    return m.group(0) if m else ""


def max_abs(line):
    m = re.search(r"max abs error ([0-9.e+-]+|nan|inf)", line)
    return float(m.group(1)) if m else None


def test_out_and_check(wgml, prog, tmp):
    out_dir = os.path.join(tmp, "not", "yet", "there")
    rc, out = run(wgml, [prog, "--out", out_dir])
    files = [os.path.join(out_dir, "output_%d.npy" % k) for k in range(2)]
    check(rc == 0 and all(os.path.exists(f) for f in files), "--out into a missing nested folder: rc %d\n%s" % (rc, out))
    if rc:
        return
    blocker = os.path.join(tmp, "a_file")
    open(blocker, "w").close()
    rc, out = run(wgml, [prog, "--out", os.path.join(blocker, "sub")])
    check(rc == 1 and "cannot create" in out and "a_file/sub" in out, "--out under a file: rc %d\n%s" % (rc, out))

    rc, out = run(wgml, [prog, "--check", files[0], "--check", files[1]])
    ok = all("ok:" in check_line(out, k) and " 0 of " in check_line(out, k) for k in range(2))
    check(rc == 0 and ok, "--check against the saved outputs passes: rc %d\n%s" % (rc, out))

    ref = np.load(files[0])
    k = int(np.argmax(np.abs(ref)))
    r = float(ref.flat[k])
    check(abs(r) > 1e-2, "good_mlp's largest output is not tiny (%g): the perturbations below need it" % r)
    tol = ATOL + RTOL * abs(r)
    moved = os.path.join(tmp, "moved.npy")
    bad = ref.copy()
    bad.flat[k] = r + 20 * tol  # stored as float32: the move is 20 tol to a few ulp
    np.save(moved, bad)
    move = float(bad.flat[k]) - float(ref.flat[k])
    rc, out = run(wgml, [prog, "--check", moved, "--check", files[1]])
    line = check_line(out, 0)
    got = max_abs(line)
    near = got is not None and abs(got - move) < 1e-2 * move  # the error is printed to 3 digits
    check(rc == 1 and "FAIL" in line and " 1 of %d " % ref.size in line and near,
          "a move of %g (20x the tolerance) fails output 0 naming it and the error: rc %d\n%s" % (move, rc, out))
    check("ok:" in check_line(out, 1), "output 1 is still checked after output 0 failed:\n%s" % out)
    rc, out = run(wgml, [prog, "--check", moved, "--atol", "%g" % (30 * tol)])
    check(rc == 0 and "ok:" in check_line(out, 0), "the same move within --atol passes: rc %d\n%s" % (rc, out))
    rc, out = run(wgml, [prog, "--check", moved, "--rtol", "%g" % (30 * tol / abs(r))])
    check(rc == 0 and "ok:" in check_line(out, 0), "the same move within --rtol passes: rc %d\n%s" % (rc, out))
    small = ref.copy()
    small.flat[k] = r + 0.5 * tol
    np.save(moved, small)
    rc, out = run(wgml, [prog, "--check", moved])
    check(rc == 0 and "ok:" in check_line(out, 0), "a move of half the default tolerance passes: rc %d\n%s" % (rc, out))

    for name, v in (("NaN", np.nan), ("inf", np.inf)):
        odd = ref.copy()
        odd.flat[k] = v
        np.save(moved, odd)
        rc, out = run(wgml, [prog, "--check", moved])
        line = check_line(out, 0)
        check(rc == 1 and "FAIL" in line and " 1 of " in line, "a %s in the reference fails: rc %d\n%s" % (name, rc, out))

    np.save(moved, ref.reshape(ref.shape[::-1]))
    rc, out = run(wgml, [prog, "--check", moved])
    shape = lambda t: "[%s]" % ", ".join(map(str, t))
    want = "is float32 %s, the output is float32 %s" % (shape(ref.shape[::-1]), shape(ref.shape))
    check(rc == 1 and "check of output 0" in out and want in out, "a reference of another shape fails: rc %d\n%s" % (rc, out))
    rc, out = run(wgml, [prog, "--check", os.path.join(tmp, "none.npy")])
    check(rc == 1 and "check of output 0" in out and "none.npy" in out, "a missing reference fails: rc %d\n%s" % (rc, out))


def test_bad_tolerances(wgml, prog):
    for opt in ("--atol", "--rtol"):
        for v in ("-1", "abc", "nan", "", "1e-3x", "inf"):
            rc, out = run(wgml, [prog, opt, v])
            check(rc == 2 and "%s needs a number" % opt in out and "'%s'" % v in out,
                  "%s '%s' is a usage error: rc %d\n%s" % (opt, v, rc, out))
    rc, out = run(wgml, [prog, "--atol"])
    check(rc == 2 and "--atol" in out, "--atol without a value is a usage error: rc %d\n%s" % (rc, out))


def test_int64_input(wgml, tmp):
    prog = os.path.join(CORPUS, "good_embedding_int64")
    ids = os.path.join(tmp, "ids.npy")
    np.save(ids, np.array([[0, 1, 2], [3, 2, 1]], dtype=np.int64))
    d = os.path.join(tmp, "emb", "out")
    rc, out = run(wgml, [prog, "--input", "0", ids, "--out", d])
    saved = os.path.join(d, "output_0.npy")
    check(rc == 0 and os.path.exists(saved), "good_embedding_int64 with its ids from a file: rc %d\n%s" % (rc, out))
    if rc == 0:
        rc, out = run(wgml, [prog, "--input", "0", ids, "--check", saved])
        check(rc == 0 and "ok:" in check_line(out, 0), "its output checks against itself: rc %d\n%s" % (rc, out))


if __name__ == "__main__":
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    wgml = os.path.join(build, "wgml")
    mlp = os.path.join(CORPUS, "good_mlp")
    with tempfile.TemporaryDirectory() as tmp:
        test_out_and_check(wgml, mlp, tmp)
        test_bad_tolerances(wgml, mlp)
        test_int64_input(wgml, tmp)
    with open(os.path.join(CORPUS, "good_mlp"), "rb") as f:
        data = f.read()
    absent = "wgmltest.absent.x"  # as long as the name it replaces, so the string's length holds
    assert len(absent) == len("aten.relu.default") and data.count(b"aten.relu.default") == 1
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "absent.pte")
        with open(bad, "wb") as f:
            f.write(data.replace(b"aten.relu.default", absent.encode()))
        rc, out = run(wgml, [bad])
    check(rc == 1 and "1 unsupported operator: " + absent in out,
          "a program with an operator wgml lacks: rc %d\n%s" % (rc, out))
    rc, out = run(wgml, [os.path.join(CORPUS, "good_portable_mlp")])
    check(rc == 0 and "output 1" in out, "the portable-kernel program runs: rc %d\n%s" % (rc, out))
    print("%d passed, %d failed" % (passes, failures))
    sys.exit(1 if failures else 0)
