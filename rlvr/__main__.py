"""``python -m rlvr``: the same command line as ``rlvr``."""

from rlvr.cli import main

if __name__ == "__main__":
    main()
