"""Every part a split test holds runs as a CTest: compares tests/CMakeLists.txt's WGML_TEST_PARTS
with what each binary lists (`test --list-parts`), so that a part added to a test cannot be left
out of CI, nor a listed part be missing from the binary.

    check_parts.py TESTS_BIN_DIR "test_x:part,part" ...
"""
import subprocess
import sys
from pathlib import Path


def main():
    bin_dir, entries = Path(sys.argv[1]), sys.argv[2:]
    bad = 0
    for e in entries:
        name, _, parts = e.partition(":")
        want = parts.split(",")
        r = subprocess.run([str(bin_dir / name), "--list-parts"], capture_output=True, text=True, timeout=60)
        got = r.stdout.split()
        ok = r.returncode == 0 and got == want
        bad += not ok
        print("%s %s: CMake lists %s, the binary holds %s" % ("ok  " if ok else "FAIL", name, want, got))
    print("%d passed, %d failed" % (len(entries) - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
