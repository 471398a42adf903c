"""Package boundaries the architecture relies on: costmodel never imports the GPU suite, and modules
and functions stay small enough to read (700 and 120 lines)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _sources(*folders):
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_costmodel_never_imports_the_calibration_suite():
    offenders = []
    for path in _sources("costmodel"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("calibration"):
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                          if n.split(".")[0] == "calibration" or n.startswith("costmodel.calibration")]
    assert not offenders


def test_modules_and_functions_stay_small():
    big = []
    for path in _sources("costmodel", "calibration"):
        src = path.read_text()
        if len(src.splitlines()) > 700:
            big.append(f"{path.relative_to(ROOT)}: {len(src.splitlines())} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 120:
                big.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not big
