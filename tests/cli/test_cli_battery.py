"""A battery over the command line: whatever numbers a user types into the numeric flags, the CLI
answers or refuses with the library's own error (one line, naming the flag), never with a Python
traceback (hypothesis, in-process through typer's runner)."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from costmodel.cli import app
from costmodel.errors import CostmodelError

RUNNER = CliRunner()
BASE = ["--model", "llama3-8b", "--cluster", "dgx-h100"]
ODD = ["nan", "inf", "-inf", "0", "-1", "-0.0", "1e30", "99999999999999999999999", "abc", "", "1.5", "2^10", "0x10"]
VALUES = st.one_of(st.sampled_from(ODD), st.integers(-10 ** 7, 10 ** 7).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr))
PREDICT_FLAGS = ["--gbs", "--seq-len", "--nodes", "--tp", "--pp", "--cp", "--mbs", "--vp", "--power-cap-w",
                 "--inlet-temp-c", "--warm-steps", "--recompute-num-layers"]
RECOMMEND_FLAGS = ["--gbs", "--seq-len", "--nodes", "--top", "--max-mbs", "--max-temp-c", "--step-time-slack",
                   "--power-cap-w", "--cap-levels", "--node-power-kw"]
SLOW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(args):
    r = RUNNER.invoke(app, args)
    e = r.exception
    if e is None or isinstance(e, SystemExit):
        # typer's own usage errors (a non-number for an int flag) exit 2 with a usage message
        assert r.exit_code in (0, 2, 3), (args, r.exit_code, r.output[-500:])
        return r
    assert isinstance(e, CostmodelError), (args, repr(e))
    line = str(e)
    assert e.exit_code in (2, 3) and line and "\n" not in line, (args, line)
    return r


@SLOW
@given(st.lists(st.tuples(st.sampled_from(PREDICT_FLAGS), VALUES), min_size=1, max_size=3))
def test_predict_never_raises_a_traceback(pairs):
    _check(["predict", *BASE] + [x for f, v in pairs for x in (f, v)])


@SLOW
@given(st.lists(st.tuples(st.sampled_from(RECOMMEND_FLAGS), VALUES), min_size=1, max_size=2))
def test_recommend_never_raises_a_traceback(pairs):
    _check(["recommend", *BASE] + [x for f, v in pairs for x in (f, v)])


@SLOW
@given(st.sampled_from(["--nodes", "--gpus-per-node"]), VALUES)
def test_collectives_never_raises_a_traceback(flag, value):
    _check(["collectives", "--cluster", "dgx-h100", "--collective", "all_reduce", flag, value])


@pytest.mark.parametrize("flag,value", [("--gbs", "nan"), ("--seq-len", "0"), ("--power-cap-w", "inf"),
                                        ("--inlet-temp-c", "-300"), ("--nodes", "0"), ("--mbs", "-1")])
def test_named_bad_numbers_are_refused_naming_the_flag(flag, value):
    r = _check(["predict", *BASE, flag, value])
    assert r.exit_code == 2 or isinstance(r.exception, CostmodelError)
    text = str(r.exception) if isinstance(r.exception, CostmodelError) else r.output
    assert flag in text, text


def test_flags_the_layout_cannot_honour_are_refused_not_dropped():
    """--sp given with TP 1 is refused (the default turns SP on only where TP > 1); --bf16-edge-layers
    beyond half the model's layers is refused naming the layer count (Llama 3 8B: 32), and at half of
    them, which leaves no fp8 layer."""
    r = _check(["predict", *BASE, "--tp", "1", "--sp"])
    assert isinstance(r.exception, CostmodelError) and "sequence parallelism needs TP > 1" in str(r.exception)
    r = _check(["predict", *BASE, "--tp", "1"])
    assert r.exception is None or isinstance(r.exception, SystemExit)
    r = _check(["predict", *BASE, "--precision", "fp8", "--fp8-recipe", "tensorwise", "--bf16-edge-layers", "17"])
    assert isinstance(r.exception, CostmodelError) and "num_layers (32)" in str(r.exception)
    r = _check(["predict", *BASE, "--precision", "fp8", "--fp8-recipe", "tensorwise", "--bf16-edge-layers", "16"])
    assert isinstance(r.exception, CostmodelError) and "which is every layer of 32" in str(r.exception)
    r = _check(["predict", *BASE, "--precision", "fp8", "--fp8-recipe", "tensorwise", "--bf16-edge-layers", "15"])
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_candidates_below_one_is_refused_in_time_mode_too():
    r = _check(["recommend", *BASE, "--candidates", "0"])
    assert isinstance(r.exception, CostmodelError) and "--candidates" in str(r.exception)
