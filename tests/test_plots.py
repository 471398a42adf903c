"""The plots' axes as a reader sees them (costmodel/plots.py)."""
import pytest

pytest.importorskip("matplotlib")


def test_a_log_axis_under_a_decade_labels_plain_numbers_that_do_not_collide():
    """A validate scatter of steps between 0.27 and 0.55 s: matplotlib's default labelled every minor tick
    as '3x10^-1', '4x10^-1', ..., which ran into each other; the labels are now plain numbers (under a
    decade matplotlib's log locator steps linearly), a handful per axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from costmodel.plots import plain_log_ticks
    fig, ax = plt.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.27, 0.55)
    ax.set_ylim(0.27, 0.55)
    plain_log_ticks(ax)
    fig.canvas.draw()
    for axis in (ax.xaxis, ax.yaxis):
        shown = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text() and t.get_visible()]
        inside = [t for t in shown if 0.27 <= float(t) <= 0.55]      # a label not a plain number fails here
        assert 2 <= len(inside) <= 8 and len(set(inside)) == len(inside) and "0.3" in inside, shown
    # over two decades: 1, 2 and 5 times the powers of ten
    ax.set_xlim(0.8, 60.0)
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.xaxis.get_ticklabels(which="both") if t.get_text()]
    assert [t for t in shown if 0.8 <= float(t) <= 60.0] == ["1", "2", "5", "10", "20", "50"], shown
    plt.close(fig)
