"""`python -m impl` runs the broker, like `python -m impl.server`."""

from impl.server import main

if __name__ == "__main__":
    raise SystemExit(main())
