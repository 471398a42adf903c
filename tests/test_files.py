"""Output files are written through a temporary file and renamed: a failed write keeps the old file."""
import pytest

from costmodel.errors import InputError
from costmodel.files import write_atomically


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
