"""`python -m wgml VERB ...` runs the wgml CLI (generate, finetune, eval, export-lora, info, run,
bench): the `wgml` program installed inside the package beside libwgml.so, or the source tree's
build/wgml."""
import os
import sys
from pathlib import Path


def cli_path() -> Path:
    here = Path(__file__).resolve().parent
    for p in (here / "wgml", here.parent.parent / "build" / "wgml"):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise SystemExit("wgml: the CLI is not installed with this package (pip install ./python builds it)")


def main() -> None:
    p = cli_path()
    os.execv(str(p), [str(p)] + sys.argv[1:])


if __name__ == "__main__":
    main()
