"""`python -m reconcile` runs the same CLI as the `node-holder` console script."""

from reconcile.cli import main

if __name__ == "__main__":
    main()
