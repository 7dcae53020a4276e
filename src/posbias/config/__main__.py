"""``python -m posbias.config FILE …``: check config files as the workflow will (:func:`posbias.config.checks.main`)."""

from posbias.config.checks import main

if __name__ == "__main__":
    raise SystemExit(main())
