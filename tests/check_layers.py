#!/usr/bin/env python3
"""The layering check: every import points down.

Layers, lowest first: gpu, tensor, graph, ops, autograd, optim, io, program, model, train, tools.
(a) Includes: every `#include "X/..."` in a file under src/<layer>/ names the same or a lower
    layer, and so does every public header it includes (and every one a public header includes) (include/*.h, each the header of one
    layer: PUBLIC_LAYERS; one that is not listed there is reported until it is); files under
    tools/ include only the public headers (include/) and tools' own *.h. A WGSL kernel's
    `//!include NAME` names a kernel file (NAME.wgsl) of the same or a lower layer.
(b) Symbols: for each object file of the wgml library (CMakeFiles/wgml.dir/src/<layer>/...o,
    whose source still exists), every undefined symbol that another wgml object defines is
    defined in the same or a lower layer (`nm`). The generated kernel table (wgml_shaders.c)
    belongs to gpu, which reads it.

Known violations that other work will remove are listed in an allow-list file, one a line:
    include <file> <included path>   # reason
    symbol  <source file> <symbol>   # reason
FILE and TARGET may be shell patterns (src/ops/*). An entry without a reason, or one that no
longer matches a violation, is itself an error, so the list only shrinks.

Prints each violation (file, include or symbol, layers) and exits 1 when there is any.

    check_layers.py --root SRC_ROOT --objects OBJ_DIR [--allow FILE] [--nm NM]
    check_layers.py --self-test --cc CC [--nm NM]
        plants violations in a temporary tree and checks that the checker reports each of
        them and exits non-zero (and passes once they are allowed).
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys
import tempfile

LAYERS = ["gpu", "tensor", "graph", "ops", "autograd", "optim", "io", "program", "model", "train", "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}
# The layer each public header belongs to: what it declares is implemented there (or lower), so
# a src file may include it from that layer up. wgml.h declares the status and errors the gpu
# layer sets, so every layer may include it; wgml-quant.h (the quantised weights, split off
# wgml.h, which includes it) has wgml.h's layer.
PUBLIC_LAYERS = {"wgml.h": "gpu", "wgml-quant.h": "gpu", "wgml-optim.h": "optim", "wgml-io.h": "io", "wgml-program.h": "program",
                 "wgml-model.h": "model", "wgml-train.h": "train"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE_EXT = (".c", ".h")


def layer_of(rel):
    """The layer of a path relative to the source root (src/<layer>/..., tools/... or a public
    header include/<name>.h of PUBLIC_LAYERS), or None."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] == "src" and len(parts) > 2 and parts[1] in RANK:
        return parts[1]
    if parts[0] == "tools":
        return "tools"
    if parts[0] == "include" and len(parts) == 2:
        return PUBLIC_LAYERS.get(parts[1])
    return None


def check_includes(root):
    """[(file, included, message)] for every include that points up."""
    found = []
    for top in ("src", "tools", "include"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                layer = layer_of(rel)
                if layer is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for inc in INCLUDE_RE.findall(text):
                    head = inc.split("/")[0]
                    if layer == "tools":
                        public = os.path.exists(os.path.join(root, "include", inc))
                        own = "/" not in inc and os.path.exists(os.path.join(root, "tools", inc))
                        if not (public or own):
                            found.append((rel, inc, f'includes "{inc}": tools may include only public headers '
                                                    f'(include/) and tools/*.h'))
                    elif head in RANK and RANK[head] > RANK[layer]:
                        found.append((rel, inc, f'includes "{inc}": {layer} -> {head} ({head} is above {layer})'))
                    elif "/" not in inc and os.path.exists(os.path.join(root, "include", inc)):
                        owner = PUBLIC_LAYERS.get(inc)
                        if owner is None:
                            found.append((rel, inc, f'includes "{inc}": a public header with no layer '
                                                    f'(add it to PUBLIC_LAYERS in check_layers.py)'))
                        elif RANK[owner] > RANK[layer]:
                            found.append((rel, inc, f'includes "{inc}": {layer} -> {owner} (the public header of '
                                                    f'{owner}, which is above {layer})'))
    return found


WGSL_INCLUDE_RE = re.compile(r'^//!include (\S+)', re.M)


def check_wgsl_includes(root):
    """[(file, included kernel, message)] for every //!include of a kernel file in a higher layer."""
    where, kernels = {}, []
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for f in sorted(files):
            if f.endswith(".wgsl"):
                rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                where[f[:-5]] = rel
                kernels.append(rel)
    found = []
    for rel in kernels:
        layer = layer_of(rel)
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
            names = WGSL_INCLUDE_RE.findall(fh.read())
        for name in names:
            owner = layer_of(where[name]) if name in where else None
            if layer and owner and RANK[owner] > RANK[layer]:
                found.append((rel, name, f'includes kernel "{name}" ({where[name]}): {layer} -> {owner} '
                                         f'({owner} is above {layer})'))
    return found


def nm_symbols(nm, obj):
    """(defined globals, undefined) of one object file."""
    out = subprocess.run([nm, "-P", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() or kind in ("V", "W"):
            defined.add(name)
    return defined, undefined


def wgml_objects(root, objects):
    """[(source path relative to root, layer, object path)] of the library's current objects."""
    found = []
    for dirpath, _, files in os.walk(objects):
        for f in sorted(files):
            if not f.endswith(".o"):
                continue
            obj = os.path.join(dirpath, f)
            if f == "wgml_shaders.c.o":
                found.append(("wgml_shaders.c (generated)", "gpu", obj))
                continue
            rel = os.path.relpath(obj, objects).replace(os.sep, "/")
            m = re.search(r"(?:^|/)((?:src|tools)/.*)\.o$", rel)
            if not m:
                continue
            src = m.group(1)
            layer = layer_of(src)
            # an object whose source was moved or deleted is left over from an older build
            if layer and os.path.exists(os.path.join(root, src)):
                found.append((src, layer, obj))
    return found


def check_symbols(root, objects, nm):
    """[(file, symbol, message)] for every call or reference that points up."""
    objs = wgml_objects(root, objects)
    if not objs:
        raise SystemExit(f"check_layers: no wgml object files under {objects} (build first)")
    table = {}
    where = {}
    undefined = {}
    for src, layer, obj in objs:
        defined, undef = nm_symbols(nm, obj)
        for name in defined:
            if name not in where or RANK[layer] < RANK[where[name][1]]:
                where[name] = (src, layer)
        undefined[src] = (layer, undef)
        table[src] = obj
    found = []
    for src in sorted(undefined):
        layer, undef = undefined[src]
        for name in sorted(undef):
            if name not in where:
                continue
            def_src, def_layer = where[name]
            if RANK[def_layer] > RANK[layer]:
                found.append((src, name, f"uses {name} (defined in {def_src}): {layer} -> {def_layer} "
                                         f"({def_layer} is above {layer})"))
    return found


def read_allow(path):
    """{(kind, file, target): line number}; raises on a malformed line."""
    allow, errors = {}, []
    if not path:
        return allow, errors
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            body, _, reason = line.partition("#")
            fields = body.split()
            if not fields:
                continue
            if len(fields) != 3 or fields[0] not in ("include", "symbol") or not reason.strip():
                errors.append(f"{path}:{n}: want 'include|symbol FILE TARGET  # reason': {line.rstrip()}")
                continue
            allow[tuple(fields)] = n
    return allow, errors


def run_check(args):
    allow, errors = read_allow(args.allow)
    violations = [("include",) + v for v in check_includes(args.root) + check_wgsl_includes(args.root)]
    violations += [("symbol",) + v for v in check_symbols(args.root, args.objects, args.nm)]
    used = set()
    bad = 0
    for kind, f, target, msg in violations:
        key = next((k for k in allow if k[0] == kind and fnmatch.fnmatchcase(f, k[1])
                    and fnmatch.fnmatchcase(target, k[2])), None)
        if key:
            used.add(key)
            continue
        print(f"LAYER VIOLATION {f}: {msg}")
        bad += 1
    for key, n in sorted(allow.items(), key=lambda kv: kv[1]):
        if key not in used:
            errors.append(f"{args.allow}:{n}: '{' '.join(key)}' no longer matches a violation: remove the line")
    for e in errors:
        print(e)
    print(f"check_layers: {bad} violation(s), {len(used)} allowed, {len(errors)} allow-list error(s)")
    return 1 if bad or errors else 0


PLANTED = {
    # gpu reaching up into graph, by include and by call
    "src/gpu/dev.c": '#include "graph/graph.h"\nint gpu_dev(void) { return graph_thing() + 1; }\n',
    "src/graph/graph.h": "int graph_thing(void);\n",
    # graph calling down into gpu is fine
    "src/graph/graph.c": '#include "graph/graph.h"\nint gpu_dev(void);\n'
                         "int graph_thing(void) { return 1; }\nint graph_ok(void) { return gpu_dev(); }\n",
    # tools reaching an internal header
    "tools/cli.c": '#include "graph/graph.h"\n#include "wgml.h"\nint main(void) { return 0; }\n',
    "include/wgml.h": "\n",
    # optim reaching the train layer's public header, and a public header with no layer
    "include/wgml-train.h": "\n",
    # a public header including one of a higher layer
    "include/wgml-optim.h": '#include "wgml.h"\n#include "wgml-train.h"\n',
    "include/wgml-new.h": "\n",
    "src/optim/opt.c": '#include "wgml.h"\n#include "wgml-train.h"\n#include "wgml-new.h"\n',
    # train including its own public header and a lower one is fine
    "src/train/tr.c": '#include "wgml-train.h"\n#include "wgml.h"\n',
    # a graph kernel including an ops kernel file; an ops kernel including a graph one is fine
    "src/graph/g_kernel.wgsl": "//!include o_part\n",
    "src/ops/o_part.wgsl": "\n",
    "src/ops/o_kernel.wgsl": "//!include g_kernel\n",
}
EXPECTED = [
    'src/gpu/dev.c: includes "graph/graph.h": gpu -> graph',
    "src/gpu/dev.c: uses graph_thing (defined in src/graph/graph.c): gpu -> graph",
    'tools/cli.c: includes "graph/graph.h": tools may include only public headers',
    'src/optim/opt.c: includes "wgml-train.h": optim -> train (the public header of train',
    'src/optim/opt.c: includes "wgml-new.h": a public header with no layer',
    'include/wgml-optim.h: includes "wgml-train.h": optim -> train (the public header of train',
    'src/graph/g_kernel.wgsl: includes kernel "o_part" (src/ops/o_part.wgsl): graph -> ops',
]


def self_test(args):
    """Plants violations in a temporary tree; the check must report each and exit non-zero."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "tree")
        objects = os.path.join(tmp, "build", "CMakeFiles", "wgml.dir")
        for rel, text in PLANTED.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)
        for rel in ("src/gpu/dev.c", "src/graph/graph.c"):
            obj = os.path.join(objects, rel + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run([args.cc, "-c", "-I", os.path.join(root, "src"), os.path.join(root, rel), "-o", obj],
                           check=True)

        def check(allow_text):
            allow = os.path.join(tmp, "allow.txt")
            with open(allow, "w") as fh:
                fh.write(allow_text)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", root, "--objects", objects,
                                "--allow", allow, "--nm", args.nm], capture_output=True, text=True)
            return r.returncode, r.stdout + r.stderr

        rc, out = check("")
        print(out)
        if rc == 0:
            failures.append("planted violations: the check exited 0")
        for want in EXPECTED:
            if want not in out:
                failures.append(f"planted violations: not reported: {want}")
        if "graph_ok" in out or "gpu_dev (" in out:
            failures.append("a downward call (graph -> gpu) was reported")
        if 'includes "wgml.h"' in out or "src/train/tr.c" in out or "o_kernel" in out:
            failures.append("a public header of the same or a lower layer was reported")
        full = ("include src/gpu/dev.c graph/graph.h  # planted\n"
                "symbol src/gpu/dev.c graph_thing  # planted\n"
                "include tools/cli.c graph/graph.h  # planted\n"
                "include src/optim/opt.c wgml-train.h  # planted\n"
                "include src/optim/opt.c wgml-new.h  # planted\n"
                "include include/wgml-optim.h wgml-train.h  # planted\n"
                "include src/graph/g_kernel.wgsl o_part  # planted\n")
        rc, out = check(full)
        if rc != 0:
            failures.append(f"every violation allowed: the check exited {rc}:\n{out}")
        rc, out = check("include src/gpu/* graph/*  # planted\nsymbol src/gpu/* graph_*  # planted\n"
                        "include tools/cli.c graph/graph.h  # planted\ninclude src/optim/* wgml-*.h  # planted\n"
                        "include include/* wgml-train.h  # planted\ninclude src/graph/*.wgsl o_*  # planted\n")
        if rc != 0:
            failures.append(f"every violation allowed by patterns: the check exited {rc}:\n{out}")
        rc, out = check(full + "symbol src/gpu/dev.c gone_symbol  # stale\n")
        if rc == 0 or "no longer matches" not in out:
            failures.append("a stale allow-list entry was not reported")
        rc, out = check("include src/gpu/dev.c graph/graph.h\n")
        if rc == 0 or "want 'include|symbol" not in out:
            failures.append("an allow-list entry without a reason was accepted")
    for f in failures:
        print("SELF-TEST FAILED:", f)
    print("check_layers self-test:", "failed" if failures else "ok")
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", help="the source tree (holds src/, tools/, include/)")
    p.add_argument("--objects", help="the wgml library's object directory (CMakeFiles/wgml.dir)")
    p.add_argument("--allow", help="the allow-list file")
    p.add_argument("--nm", default="nm")
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--cc", default="cc")
    args = p.parse_args()
    if args.self_test:
        return self_test(args)
    if not args.root or not args.objects:
        p.error("--root and --objects are required")
    return run_check(args)


if __name__ == "__main__":
    sys.exit(main())
