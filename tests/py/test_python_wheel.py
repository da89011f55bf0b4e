"""`pip install ./python` as a user runs it: a fresh venv (no system packages, no environment
variable), offline from the wheels scripts/setup.sh downloaded (.deps/dl/wheels: numpy and the
build backend, scikit-build-core, at the pinned versions), pip building the C library and the CLI
with CMake into the package.

1. The package holds libwgml.so, the `wgml` CLI and wgpu-native, and `import wgml` loads the
   library inside it (not the source tree's build/), from a folder outside the tree with
   WGML_LIBRARY unset.
2. `python -m wgml info` opens the GPU (the package's own wgpu-native) and `python -m wgml info
   --model` reads a GGUF; `python -m wgml` without a verb prints the CLI's usage.
3. The README's Python example (the first ```python block: eval, LoRA steps, generation) runs
   from the installed package on the tiny test model.
Usage: test_python_wheel.py BUILD_DIR (BUILD_DIR unused: the package builds its own)"""
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from test_finetune_cli import write_model  # noqa: E402

WHEELS = os.path.join(ROOT, ".deps", "dl", "wheels")
failures = 0


def check(ok, what):
    global failures
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    failures += not ok


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=900, **kw)


def main():
    t0 = time.time()
    env = {k: v for k, v in os.environ.items() if k not in ("WGML_LIBRARY", "PYTHONPATH", "VIRTUAL_ENV")}
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        r = run(["/usr/bin/python3", "-m", "venv", venv])
        check(r.returncode == 0, "a fresh venv: " + r.stderr[-300:])
        py = os.path.join(venv, "bin", "python")
        r = run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", WHEELS,
                 os.path.join(ROOT, "python")], cwd=tmp, env=env)
        print("pip install ./python: %.1f s" % (time.time() - t0), flush=True)
        check(r.returncode == 0, "pip install ./python: " + (r.stdout + r.stderr)[-1500:])
        if r.returncode:
            return finish()
        r = run([py, "-c", "import wgml, os; d = os.path.dirname(wgml.__file__); print(wgml.library_path); "
                 "print(sorted(f for f in os.listdir(d) if not f.endswith('.py')))"], cwd=tmp, env=env)
        lines = r.stdout.split("\n")
        check(r.returncode == 0 and lines[0].startswith(venv) and lines[0].endswith("/wgml/libwgml.so"),
              "import wgml loads the package's own library: %r %s" % (lines[0], r.stderr[-300:]))
        check(r.returncode == 0 and all(f in lines[1] for f in ("'libwgml.so'", "'libwgpu_native-release.so'", "'wgml'")),
              "the package holds the library, wgpu-native and the CLI: %s" % lines[1:2])
        r = run([py, "-m", "wgml", "info"], cwd=tmp, env=env)
        check(r.returncode == 0 and "adapter" in r.stdout.lower(), "python -m wgml info: " + (r.stdout + r.stderr)[-300:])
        model = os.path.join(tmp, "tiny.gguf")
        write_model(model)
        r = run([py, "-m", "wgml", "info", "--model", model], cwd=tmp, env=env)
        check(r.returncode == 0 and "llama" in r.stdout, "python -m wgml info --model: " + (r.stdout + r.stderr)[-300:])
        r = run([py, "-m", "wgml"], cwd=tmp, env=env)
        check(r.returncode == 2 and "export-lora" in r.stderr, "python -m wgml: the usage")
        readme = open(os.path.join(ROOT, "README.md")).read()
        blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
        check(len(blocks) >= 1, "README has a Python example")
        if blocks:
            example = blocks[0]
            lines = [ln for ln in example.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")]
            check(len(lines) <= 12, "the README example is about ten lines (%d)" % len(lines))
            data = os.path.join(tmp, "text.txt")
            with open(data, "w") as f:
                f.write("".join("the theme of line %d: then there were %d sheep in the meadow.\n" % (i, i % 13) for i in range(120)))
            r = run([py, "-c", example], cwd=tmp, env=dict(env, WGML_MODEL=model, WGML_DATA=data))
            check(r.returncode == 0 and "perplexity" in r.stdout, "the README example runs from the installed package: " +
                  r.stdout[-800:] + r.stderr[-800:])
            r = run([py, "-c", "import wgml; help(wgml)"], cwd=tmp, env=dict(env, PAGER="cat"))
            check(r.returncode == 0 and "Trainer" in r.stdout and "GIL" in r.stdout, "help(wgml) reads: " + r.stderr[-300:])
    print("%.1f s" % (time.time() - t0))
    return finish()


def finish():
    print("all passed" if not failures else "%d check(s) failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
