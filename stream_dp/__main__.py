"""`python -m stream_dp`: the `stream-dp` command line."""

import sys

from stream_dp.cli import main

if __name__ == "__main__":
    sys.exit(main())
