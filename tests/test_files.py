"""Output files are written through a temporary file and renamed: a failed write keeps the old file.
Text inputs are read through one helper, which drops a UTF-8 byte-order mark."""
import os
import re
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.files import open_text, read_text, write_atomically

PACKAGE = Path(__file__).resolve().parents[1] / "costmodel"


def test_a_byte_order_mark_is_dropped_and_a_lenient_read_keeps_the_lines_after_a_bad_byte(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_bytes(b"\xef\xbb\xbfrow_id,step_time_s\nr1,\xff1.5\nr2,2.0\n")
    assert read_text(f, lenient=True).splitlines() == ["row_id,step_time_s", "r1,\ufffd1.5", "r2,2.0"]
    with pytest.raises(UnicodeDecodeError):
        read_text(f)
    with open_text(f, lenient=True) as fh:
        assert next(fh) == "row_id,step_time_s\n"


def test_the_package_reads_text_inputs_only_through_the_helper():
    """A reader that decodes a file itself can forget the byte-order mark (a spreadsheet's "CSV UTF-8"
    writes one, which then glues itself to the first header): outside costmodel.files only the
    builders under costmodel/fit, which read the repository's own data, name an encoding to read."""
    reading = re.compile(r"read_text\(\s*encoding=|\bopen\([^)]*encoding=")
    writing = re.compile(r"[\"'][wax]\+?b?[\"']")        # open(path, "w", encoding=...) writes
    offenders = [f"{f.relative_to(PACKAGE)}: {ln.strip()}" for f in PACKAGE.rglob("*.py")
                 if f.name != "files.py" and f.relative_to(PACKAGE).parts[0] != "fit"
                 for ln in f.read_text().splitlines() if reading.search(ln) and not writing.search(ln)]
    assert offenders == []
    assert reading.search('p.read_text(encoding="utf-8")') and not writing.search('open(p, encoding="utf-8")')


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    f = tmp_path / "plot.png"
    f.write_text("old")

    def failing(tmp):
        with open(tmp, "w") as fh:
            fh.write("half")
        raise ValueError("Format 'xyz' is not supported")
    with pytest.raises(InputError, match="--plot: cannot write .*plot.png: Format 'xyz' is not supported"):
        write_atomically(f, failing, "--plot")
    assert f.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]
    write_atomically(f, "new", "--trace")
    assert f.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_an_unwritable_folder_is_one_error_naming_the_flag(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="--trace: cannot write"):
        write_atomically(blocker / "sub" / "trace.json", "{}", "--trace")


def test_an_input_named_on_the_command_line_is_never_an_output(tmp_path):
    """The output's own flag value is not an input; any other existing file the command line names is,
    also through a symlink or '--flag=value'; a missing folder and a directory are refused."""
    from costmodel.files import check_output
    log, cl = tmp_path / "run.log", tmp_path / "cl.yaml"
    log.write_text("x")
    cl.write_text("y")
    link = tmp_path / "link.log"
    link.symlink_to(log)
    argv = ["costmodel", "compare", "--log", str(log), f"--cluster={cl}", "--trace", str(link)]
    with pytest.raises(InputError, match="--trace: .*link.log is also an input of this command"):
        check_output(link, "--trace", argv=argv)
    with pytest.raises(InputError, match="-o: .*cl.yaml is also an input"):
        check_output(cl, "-o", argv=["costmodel", "calibrate", "fit", "x.txt", "--output", str(cl), "--cluster",
                                     str(cl)])
    old = tmp_path / "old.json"
    old.write_text("{}")
    assert check_output(old, "--trace", argv=["costmodel", "compare", "--log", str(log), "--trace", str(old)]) == old
    with pytest.raises(InputError, match="the folder .*nowhere does not exist"):
        check_output(tmp_path / "nowhere" / "t.json", "--trace", argv=[])
    with pytest.raises(InputError, match="is a directory"):
        check_output(tmp_path, "-o", argv=[])


def test_a_rewritten_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    import os
    f = tmp_path / "p.yaml"
    f.write_text("old")
    os.chmod(f, 0o644)
    write_atomically(f, "new", "-o")
    assert (f.stat().st_mode & 0o777) == 0o644
    mask = os.umask(0o022)
    try:
        g = write_atomically(tmp_path / "q.yaml", "new", "-o")
    finally:
        os.umask(mask)
    assert (g.stat().st_mode & 0o777) == 0o644


def test_compare_trace_over_its_own_log_is_refused_and_the_log_kept(tmp_path):
    """compare --trace naming the --log file: one error, exit 2, the log unchanged (it was overwritten)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path
    src = Path(__file__).resolve().parent / "data" / "logs" / "megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
    log = tmp_path / "run.log"
    shutil.copy(src, log)
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "compare", "--log", str(log), "--cluster", "dgx-h100",
                        "--trace", str(log)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "is also an input of this command" in r.stderr
    assert log.read_bytes() == src.read_bytes()


def test_a_symbolic_link_stays_a_link_and_its_target_is_written(tmp_path):
    """-o latest.yaml -> runs/p1.yaml: the link is kept and p1.yaml gets the new text (replacing the
    link by a file would silently break whatever else reads through it); a link to an input is refused."""
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "p1.yaml"
    target.write_text("old")
    link = tmp_path / "latest.yaml"
    link.symlink_to(target)
    assert write_atomically(link, "new", "-o") == link
    assert link.is_symlink() and target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["p1.yaml"]
    with pytest.raises(InputError, match="is also an input of this command"):
        write_atomically(link, "x", "-o", inputs=[target])
    assert target.read_text() == "new"


def test_a_plot_folder_is_made_in_a_folder_that_exists_never_a_new_tree(tmp_path):
    """--plot DIR makes DIR where its parent exists; a mistyped parent is refused (it had created the whole
    tree, e.g. under /), as an output file's missing folder is."""
    from costmodel.files import output_dir
    assert output_dir(tmp_path / "plots", "--plot").is_dir()
    with pytest.raises(InputError, match="--plot: cannot create .*: the folder .*nodir does not exist"):
        output_dir(tmp_path / "nodir" / "plots", "--plot")
    assert not (tmp_path / "nodir").exists()


def test_a_device_is_not_called_a_missing_file(tmp_path):
    """/dev/null exists but is no capture: refused as not a regular file, a missing path as no such file."""
    from costmodel.files import not_a_file
    assert not_a_file("/dev/null").startswith("is not a regular file")
    assert not_a_file(tmp_path / "gone.log") == "no such file"


def test_a_plot_folder_named_as_an_image_is_refused_not_made(tmp_path):
    """validate --plot outp/x.png had made a folder named x.png and written outp/x.png/predicted_vs_measured.png:
    a path that does not exist yet and ends in an image suffix is a file name, refused before anything is
    made; a folder of that name that exists is still written into, and an existing file is refused as before."""
    from costmodel.files import output_dir
    for name in ("x.png", "x.PDF", "x.svg", "x.jpg"):
        with pytest.raises(InputError) as e:
            output_dir(tmp_path / name, "--plot", "validate")
        assert str(e.value) == (f"--plot: {tmp_path / name} is named as an image file; validate writes its plots into "
                                f"a folder: name a folder for the plots (e.g. {tmp_path / 'x'})")
        assert not (tmp_path / name).exists()
    (tmp_path / "made.png").mkdir()
    assert output_dir(tmp_path / "made.png", "--plot") == tmp_path / "made.png"
    (tmp_path / "f.png").write_text("")
    with pytest.raises(InputError, match=r"f\.png is a file; name a folder for the plots"):
        output_dir(tmp_path / "f.png", "--plot")
    pytest.importorskip("matplotlib")
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "validate", str(root / "benchmarks/data/dev_set_moe.csv"),
                        "--plot", str(tmp_path / "outp.png")], capture_output=True, text=True, cwd=root, timeout=300)
    assert r.returncode == 2 and "validate writes its plots into a folder" in r.stderr and r.stdout == ""
    assert not (tmp_path / "outp.png").exists()


def _pipe(tmp_path):
    """A FIFO in ``tmp_path`` and its read end, opened without blocking (so a writer never waits for a
    reader, and a test never hangs)."""
    import os
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return fifo, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)


def _drain(fd) -> bytes:
    import os
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    return out


def test_text_for_a_pipe_is_written_into_it_never_a_file_in_its_place(tmp_path):
    """-o naming a FIFO (or a link to one), as -o /dev/null would: the text goes into the pipe and the
    pipe stays a pipe (it had been replaced by a regular file); a plot (not text) is refused instead."""
    import stat
    fifo, fd = _pipe(tmp_path)
    assert write_atomically(fifo, "hello\n", "-o") == fifo
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and _drain(fd) == b"hello\n"
    link = tmp_path / "latest.yaml"
    link.symlink_to(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    assert write_atomically(link, "via link\n", "-o") == link
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode) and _drain(fd) == b"via link\n"
    plot = tmp_path / "front.png"
    plot.symlink_to(fifo)
    with pytest.raises(InputError) as e:
        write_atomically(plot, lambda tmp: Path(tmp).write_bytes(b"png"), "--plot")
    assert str(e.value) == f"--plot: {plot} is a pipe (FIFO), not a regular file: name a file to write"
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and sorted(p.name for p in tmp_path.iterdir()) == \
        ["front.png", "latest.yaml", "pipe"]


def test_calibrate_fit_into_a_pipe_writes_the_profile_and_keeps_the_pipe(tmp_path):
    """calibrate fit -o LINK, LINK -> a FIFO: exit 0, the profile read from the pipe, the pipe still a pipe."""
    import stat
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    fifo, fd = _pipe(tmp_path)
    link = tmp_path / "out.yaml"
    link.symlink_to(fifo)
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "calibrate", "fit",
                        str(root / "tests/data/readers/nccl_tests_oci_a100_16ranks_2nodes.txt"), "--cluster",
                        "dgx-a100-40gb", "--collective", "all_reduce", "-o", str(link)],
                       capture_output=True, text=True, cwd=root, timeout=300)
    text = _drain(fd).decode()
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()
    assert text.startswith("# a100-sxm-40gb profile fitted by `costmodel calibrate fit`") and "\ngpu: a100-sxm-40gb\n" in text


def test_a_link_into_a_missing_folder_is_refused_before_any_work(tmp_path):
    """--plot front.png, a link to a file in a folder that does not exist: refused by the check made before
    the work (it had passed, and the write failed only after the solve)."""
    from costmodel.files import check_output
    link = tmp_path / "front.png"
    link.symlink_to(tmp_path / "gone" / "front.png")
    with pytest.raises(InputError) as e:
        check_output(link, "--plot")
    assert str(e.value) == (f"--plot: cannot write {link} (a link to {tmp_path / 'gone' / 'front.png'}): "
                            f"the folder {tmp_path / 'gone'} does not exist")


def test_a_plot_that_cannot_be_written_in_its_folder_is_refused_before_the_work(tmp_path):
    """validate/compare --plot DIR where DIR/<plot>.png is a folder: one line naming --plot and the file,
    exit 2, before any prediction (it had come after the work, and --json had printed nothing)."""
    pytest.importorskip("matplotlib")
    import subprocess
    import sys
    from costmodel.files import output_dir
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "v" / "predicted_vs_measured.png").mkdir(parents=True)
    with pytest.raises(InputError) as e:
        output_dir(tmp_path / "v", "--plot", "validate", files=["predicted_vs_measured.png"])
    assert str(e.value) == f"--plot: {tmp_path / 'v' / 'predicted_vs_measured.png'} is a directory; name the file to write"
    (tmp_path / "c" / "metrics.png").mkdir(parents=True)
    log = root / "tests/data/logs/megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
    for args, bad in ((["validate", root / "benchmarks/data/dev_set.csv", "--plot", tmp_path / "v", "--json"],
                       tmp_path / "v" / "predicted_vs_measured.png"),
                      (["compare", "--log", log, "--cluster", "dgx-h100", "--plot", tmp_path / "c", "--json"],
                       tmp_path / "c" / "metrics.png")):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", *map(str, args)], capture_output=True, text=True,
                           cwd=root, timeout=300)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr == f"costmodel: error: --plot: {bad} is a directory; name the file to write\n"


def test_the_report_is_printed_before_a_plot_write_that_fails(tmp_path, monkeypatch):
    """A plot write failing after the checks (a full disk): validate's and compare's tables are out first."""
    from typer.testing import CliRunner
    from costmodel import plots
    from costmodel.cli import app
    root = Path(__file__).resolve().parents[1]

    def full(*a, **k):
        raise InputError("--plot", "", "cannot write it: No space left on device")
    monkeypatch.setattr(plots, "require_matplotlib", lambda: None)
    monkeypatch.setattr(plots, "validate_scatter", full)
    monkeypatch.setattr(plots, "metric_bars", full)
    r = CliRunner().invoke(app, ["validate", str(root / "benchmarks/data/dev_set.csv"), "--plot", str(tmp_path / "v")])
    assert "No space left" in str(r.exception) and "Step-time error per source" in r.stdout
    log = root / "tests/data/logs/megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
    r = CliRunner().invoke(app, ["compare", "--log", str(log), "--cluster", "dgx-h100", "--plot", str(tmp_path / "c"),
                                 "--trace", str(tmp_path / "c" / "t.json")])
    assert "No space left" in str(r.exception)
    assert "Measured vs predicted" in r.stdout and f"wrote {tmp_path / 'c' / 't.json'}" in r.stdout
