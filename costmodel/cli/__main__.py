"""``python -m costmodel.cli``: the same as the ``costmodel`` console script."""
from . import main

main()
