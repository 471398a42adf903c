"""Every exception class the project defines derives from the one root, CostmodelError."""
import importlib
import inspect
import pkgutil

import costmodel
import pytest

from costmodel.errors import CostmodelError, InfeasibleError, InputError


def _modules():
    import costmodel.calibration as calibration
    for pkg in (costmodel, calibration):
        yield pkg
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith(".__main__"):
                continue
            yield importlib.import_module(info.name)


def test_every_exception_class_derives_from_the_root():
    found = []
    for mod in _modules():
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__.startswith(
                    ("costmodel", "calibration")):
                found.append(obj)
                assert issubclass(obj, CostmodelError), f"{obj.__module__}.{name} is not a CostmodelError"
    assert len(set(found)) >= 12          # the root, InputError, the readers' errors, FitError, the ILP's


def test_exit_codes():
    assert InputError("--tp", "", "bad").exit_code == 2
    assert InfeasibleError("temperature", "too hot").exit_code == 3


@pytest.mark.parametrize("name", ["x" * 5000, "y" * 300, "z" * 300 + ".json", "w" * 3000])
def test_a_name_the_os_cannot_look_up_is_one_clear_error(name):
    """A model name far past the OS's limits (NAME_MAX 255, PATH_MAX 4096) is refused by name, never
    a traceback: too long for either, unknown as a catalog name, or a file the OS cannot open."""
    from costmodel.specs import load_model
    with pytest.raises(InputError) as e:
        load_model(name)
    assert e.value.where == "--model"


@pytest.mark.parametrize("text,where,why", [
    ("name: x\n\tgpu: h100\n", "line 2, column 1", "found a tab character that violates indentation"),
    ("name: x\ngpu: [h100\n", "line 3, column 1", "did not find expected ',' or ']'"),
])
def test_a_yaml_syntax_error_names_its_line_and_cause(tmp_path, text, where, why):
    """A tab or an unclosed bracket in a hardware file: the one-line error says where the parser
    stopped and why, not only PyYAML's context ('while scanning a plain scalar')."""
    from costmodel.errors import InputError
    from costmodel.specs import load_cluster
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as e:
        load_cluster(str(f))
    assert f"not valid YAML: {where}: {why}" in str(e.value)
