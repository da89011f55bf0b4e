"""The committed ExecuTorch fixture (tests/et/fixture/programs.tar.xz): every program the tests
run, exported once by tests/et/export_fixture.py with the pinned ExecuTorch, with each backend
suite case's inputs and reference outputs. CMake unpacks it into BUILD/et-fixture; the tests
read it from there and never export.

Layout of the unpacked folder:
    manifest.json                   format, the executorch and torch versions that made it, and
                                    the entries below (suite cases, named programs)
    suite/<flow>/<KEY>.pte          the program of a suite case of that flow
    suite/data/<KEY>.npz            a case's inputs (in0, in1, ...), eager PyTorch's outputs (out0,
                                    ...) and, where the module runs in float64, the float64 outputs
                                    as a float32 residual (res0, ...: float64 = out + res); one
                                    file for both flows (the same module and inputs)
    programs/<name>.pte             a named program of tests/et/programs.py

Only numpy is needed here, so the suite runner starts without PyTorch.
"""
import json
import re
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ARCHIVE = HERE / "fixture" / "programs.tar.xz"
FORMAT = 1


class FixtureError(Exception):
    pass


def pins():
    """{package: version} of the PyTorch venv's pins (scripts/requirements-pt.txt)."""
    out = {}
    for line in (ROOT / "scripts" / "requirements-pt.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def default_dir(build_dir):
    return Path(build_dir) / "et-fixture"


class Fixture:
    def __init__(self, path):
        self.dir = Path(path)
        mf = self.dir / "manifest.json"
        if not mf.is_file():
            raise FixtureError("no ExecuTorch fixture at %s (CMake unpacks %s there; re-run cmake)" % (self.dir, ARCHIVE))
        self.manifest = json.loads(mf.read_text())
        if self.manifest.get("format") != FORMAT:
            raise FixtureError("%s: format %s, this code reads format %d" % (mf, self.manifest.get("format"), FORMAT))
        self.programs = {p["name"]: p for p in self.manifest["programs"]}

    def check_pins(self):
        """The fixture must have been made by the pinned ExecuTorch and PyTorch: a new pin means
        regenerating it (tests/et/export_fixture.py)."""
        want = pins()
        bad = ["%s %s (the pin is %s)" % (k, self.manifest.get(k), want.get(k)) for k in ("executorch", "torch")
               if self.manifest.get(k) != want.get(k)]
        if bad:
            raise FixtureError("the ExecuTorch fixture was made with %s: regenerate it with tests/et/export_fixture.py"
                               % ", ".join(bad))

    def suite_cases(self, flow):
        return [c for c in self.manifest["suite"] if c["flow"] == flow]

    def case_data(self, case):
        """(pte bytes, inputs, eager outputs, float64 outputs (None where there are none)) of a
        suite case that is a program."""
        pte = (self.dir / case["pte"]).read_bytes()
        with np.load(self.dir / case["data"], allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        count = lambda p: sum(1 for k in data if k.startswith(p) and k[len(p):].isdigit())  # noqa: E731
        inputs = [data["in%d" % i] for i in range(count("in"))]
        outs = [data["out%d" % i] for i in range(count("out"))]
        f64 = [data["out%d" % i].astype(np.float64) + data["res%d" % i] if "res%d" % i in data else None
               for i in range(len(outs))]
        return pte, inputs, outs, f64

    def program(self, name, key=None):
        """The bytes of a named program; with key (tests/et/programs.py's spec_key of the module the
        test built), the program must have been exported from that very module."""
        p = self.programs.get(name)
        if p is None:
            raise FixtureError("the ExecuTorch fixture has no program '%s': regenerate it with "
                               "tests/et/export_fixture.py" % name)
        if p.get("error"):
            raise FixtureError("program '%s' did not export: %s" % (name, p["error"]))
        if key is not None and p["key"] != key:
            raise FixtureError("program '%s' in the fixture was exported from another module (key %s, the test's "
                               "module has %s): regenerate it with tests/et/export_fixture.py" % (name, p["key"], key))
        return (self.dir / p["pte"]).read_bytes()


def open_for(build_dir):
    fx = Fixture(default_dir(build_dir))
    fx.check_pins()
    return fx
