"""Build multi30k from its raw release into Parquet + a dataset card (and the Hub with --push-to-hub).

Same as `vlfair prepare multi30k ...`; usage: python datasets_scripts/multi30k/build.py --source PATH --out DIR
"""

import sys

from vlfair.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["prepare", "multi30k", *sys.argv[1:]]))
