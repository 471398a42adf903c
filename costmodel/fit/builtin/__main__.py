"""``python -m costmodel.fit.builtin [OUTDIR]``: regenerate every built-in profile."""
from .build import main

raise SystemExit(main())
