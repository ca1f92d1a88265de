"""Build pfi from its raw release into Parquet + a dataset card (and the Hub with --push-to-hub).

Same as `vlfair prepare pfi ...`; usage: python datasets_scripts/pfi/build.py --source PATH --out DIR
"""

import sys

from vlfair.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["prepare", "pfi", *sys.argv[1:]]))
