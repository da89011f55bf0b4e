"""`wgml finetune` killed with SIGKILL at random points, resumed each time, and compared with
uninterrupted runs; plus a resume that runs out of device memory. On the tiny synthetic Llama
of test_finetune_cli.py (lavapipe here).

1. Determinism: two uninterrupted runs with the same seed give byte-identical
   adapter.safetensors files and identical per-step losses and held-out perplexities.
2. SIGKILL: a run checkpointing every 2 steps is killed at random times after start-up (seeded; the seed is
   printed, WGML_KILL_SEED=N repeats it), during start-up, steps, evaluations and saves, and
   resumed each time until it finishes. Every checkpoint left behind loads (the resume says
   "resumed from ... at step S" with S the checkpoint's own step), S is never behind the last
   checkpoint the killed run had started after (only the steps since it are lost), and the
   final adapter and losses are byte-identical to the uninterrupted run.
3. Out of device memory: resuming with WGML_DEVICE_MEMORY_LIMIT too small (64 KiB: at the
   first weight upload; 512 KiB: at the first graph) prints the out-of-memory error, exits 1 and leaves the checkpoint byte-identical; resuming again
   without the limit finishes with the same adapter.
4. `wgml generate --ctx N` with no room after the prompt: a message and exit 1; a generation
   cut short by a full context says so.
Usage: test_finetune_kill.py BUILD_DIR"""
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_finetune_cli import write_model, rows  # noqa: E402

failures = 0
passes = 0


def check(ok, what):
    global failures, passes
    if ok:
        passes += 1
    else:
        failures += 1
        print("FAIL:", what)


def ckpt_step(out):
    """The step stored in out/checkpoint/state.safetensors, or None when there is none."""
    p = os.path.join(out, "checkpoint", "state.safetensors")
    if not os.path.exists(p):
        return None
    data = open(p, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    return int(json.loads(data[8:8 + n])["__metadata__"]["step"])


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    wgml = os.path.join(build, "wgml")
    seed = int(os.environ.get("WGML_KILL_SEED", str(int(time.time()) % 100000)))
    print("kill seed %d (WGML_KILL_SEED=%d repeats it)" % (seed, seed))
    rng = random.Random(seed)
    t_start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        write_model(model)
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            for i in range(200):
                f.write("the theme of line %d: then there were %d sheep in the meadow.\n" % (i, i * 7 % 13))
        steps, every = 40, 2
        common = ["--model", model, "--data", text, "--seq-len", "32", "--batch", "2", "--lr", "3e-3", "--eval-every", "8",
                  "--eval-tokens", "128", "--seed", "5", "--rank", "4", "--targets", "q,v,down", "--steps", str(steps),
                  "--save-every", str(every)]

        def run(args, env=None):
            r = subprocess.run([wgml] + args, capture_output=True, text=True, errors="replace", timeout=600,
                               env=dict(os.environ, **(env or {})))
            check("Sanitizer" not in r.stderr and "runtime error" not in r.stderr, "%s: %s" % (args[0], r.stderr[-1500:]))
            return r

        def adapter(out):
            p = os.path.join(out, "adapter.safetensors")
            return open(p, "rb").read() if os.path.exists(p) else None

        # 1. two uninterrupted runs: the same bytes. The second one is timed: the first pays the
        # driver's shader compiles, which its disk cache (in $HOME) spares every later run, so
        # a start-up measured on it would put "start-up" kills after a resumed run had finished.
        a, a2 = os.path.join(tmp, "a"), os.path.join(tmp, "a2")
        r = run(["finetune", "--out", a2] + common)
        check(r.returncode == 0, "first uninterrupted run: " + r.stderr[-600:])
        t0 = time.time()
        p = subprocess.Popen([wgml, "finetune", "--out", a] + common, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace")
        t_first, out = None, []
        for line in p.stdout:
            if line.startswith("step ") and t_first is None:
                t_first = time.time() - t0
            out.append(line)
        err = p.stderr.read()
        p.wait()
        t_run = time.time() - t0
        t_first = t_first or t_run / 2
        t_step = (t_run - t_first) / steps
        check(p.returncode == 0, "second uninterrupted run: " + "".join(out)[-600:] + err[-600:])
        ra = rows(os.path.join(a, "loss.csv"))
        check(len(ra) == steps + 1, "loss.csv has the pre-training row and %d steps: %s" % (steps, ra))
        check(ra == rows(os.path.join(a2, "loss.csv")), "determinism: the same per-step losses in two runs")
        check(adapter(a) is not None and adapter(a) == adapter(a2), "determinism: byte-identical adapter.safetensors in two runs")
        print("second uninterrupted run: %.1f s (first step after %.1f s)" % (t_run, t_first))

        # 2. SIGKILL at random points, resume until done
        k = os.path.join(tmp, "k")
        kills, resumes, done = 0, 0, False
        for attempt in range(16):
            before = ckpt_step(k)
            args = ["finetune", "--out", k] + common + (["--resume", k] if before is not None else [])
            p = subprocess.Popen([wgml] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
            lines, errs = [], []
            seen = threading.Event()
            # a quarter of the kills land in start-up (a random time before the first step could
            # finish); the rest just after a random step k in the next third of the steps left
            # (within two steps' time of it, so during a step, an evaluation or a save); after 6
            # kills the run may finish
            start_up = kills < 6 and rng.random() < 0.25
            b0 = before or 0
            target = b0 + rng.randint(1, max(1, (steps - b0) // 3)) if kills < 6 and not start_up and b0 < steps else None
            if target is not None and target > steps - 2:
                target, start_up = None, True  # a kill just before the end could come too late: kill in start-up
            if b0 >= steps:
                start_up = False  # complete already: let it write its outputs
            after_s = rng.uniform(0, 2 * t_step)
            delay = rng.uniform(0.1, t_first) if start_up else None

            def read_out(f=p.stdout):
                for line in f:
                    lines.append(line)
                    if target is not None and line.startswith("step ") and int(line.split()[1].split("/")[0]) >= target:
                        seen.set()
                seen.set()

            th = [threading.Thread(target=read_out, daemon=True),
                  threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True)]
            for x in th:
                x.start()
            if start_up:
                time.sleep(delay)
                what = "%.2f s after the start" % delay
            elif target is not None:
                seen.wait(timeout=300)
                time.sleep(after_s)
                what = "%.3f s after step %d" % (after_s, target)
            else:
                p.wait(timeout=300)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            for x in th:
                x.join(timeout=30)
            out, err = "".join(lines), "".join(errs)
            check("Sanitizer" not in err and "runtime error" not in err, "killed run: " + err[-1500:])
            if before is not None:
                started = "resumed from %s at step %d " % (k, before)
                check(started in out or p.returncode == -signal.SIGKILL and "resumed from" not in out,
                      "attempt %d: resumed from the checkpoint's step %d: %s" % (attempt, before, out[-400:]))
            printed = [int(l.split()[1].split("/")[0]) for l in out.splitlines() if l.startswith("step ")]
            after = ckpt_step(k)
            if p.returncode == -signal.SIGKILL:
                kills += 1
                if before is not None:
                    resumes += 1
                last = printed[-1] if printed else (before or 0)
                # step `last` printed: the save at the last multiple of `every` before it had finished
                floor = max(before or 0, (last - 1) // every * every if last > (before or 0) else (before or 0))
                check(after is None and before is None and last <= every or after is not None and floor <= after <= last,
                      "attempt %d (killed %s, last step printed %d): the checkpoint is at step %s, at least %d" %
                      (attempt, what, last, after, floor))
                print("attempt %d: killed %s; last step printed %d; checkpoint at step %s" % (attempt, what, last, after))
            else:
                check(p.returncode == 0 and "done:" in out, "attempt %d: finishes: rc %s %s %s" % (attempt, p.returncode, out[-400:], err[-400:]))
                print("attempt %d: finished (checkpoint at step %s before it)" % (attempt, before))
                done = True
                break
        check(done, "the killed run finished within 16 attempts")
        check(kills >= 4 and resumes >= 2, "at least 4 kills (%d) and 2 resumed runs killed (%d)" % (kills, resumes))
        rk = rows(os.path.join(k, "loss.csv"))
        check(rk == ra, "killed and resumed: the same per-step losses as the uninterrupted run:\n%s\n%s" % (rk, ra))
        check(adapter(k) == adapter(a), "killed and resumed: byte-identical adapter.safetensors")

        # 3. out of device memory on resume
        o = os.path.join(tmp, "o")
        r = run(["finetune", "--out", o] + common + ["--stop-after", "4"])
        check(r.returncode == 0 and ckpt_step(o) == 4, "run stopped at step 4: " + r.stdout[-300:] + r.stderr[-300:])
        ck = os.path.join(o, "checkpoint", "state.safetensors")
        saved = open(ck, "rb").read()
        # 64 KiB: the first weight upload fails; 512 KiB: the weights fit (about 300 KB) but the
        # first graph's arena does not (the run needs about 1 MB in all)
        for limit in ("65536", "512K"):
            r = run(["finetune", "--out", o, "--resume", o] + common, env={"WGML_DEVICE_MEMORY_LIMIT": limit})
            check(r.returncode == 1 and "out of device memory" in r.stderr and "WGML_DEVICE_MEMORY_LIMIT" in r.stderr,
                  "resume under a %s device memory limit: exit 1 and the error: rc %d %s" % (limit, r.returncode, r.stderr[-600:]))
            print("resume with WGML_DEVICE_MEMORY_LIMIT=%s: %s" % (limit, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""))
            check(open(ck, "rb").read() == saved, "the failed resume (%s) leaves the checkpoint byte-identical" % limit)
        r = run(["finetune", "--out", o, "--resume", o] + common)
        check(r.returncode == 0 and "resumed from %s at step 4 " % o in r.stdout, "resume after the failure: " + r.stderr[-400:])
        check(adapter(o) == adapter(a) and rows(os.path.join(o, "loss.csv")) == ra, "...gives the uninterrupted run's adapter and losses")
        # 4. wgml generate with a context that leaves no room: a message, exit 1
        for ctx, prompt in (("1", "a"), ("3", "abc")):
            r = run(["generate", "--model", model, "--prompt", prompt, "--ctx", ctx, "--max-tokens", "4"])
            check(r.returncode == 1 and "the context length %s leaves no room to generate" % ctx in r.stderr,
                  "generate --ctx %s with a %d-token prompt: %d %s" % (ctx, len(prompt), r.returncode, r.stderr[-300:]))
        r = run(["generate", "--model", model, "--prompt", "a", "--ctx", "3", "--max-tokens", "8"])
        check(r.returncode == 0 and "3 tokens generated" in r.stderr and "the context is full" in r.stderr,
              "generate stopped by a full context says so: " + r.stderr[-300:])
    print("%d passed, %d failed (%.1f s)" % (passes, failures, time.time() - t_start))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
