"""The Spack gateway (climstack.spack): one Spack instance's argv and environment, and the
scripts it runs in Spack's Python, their JSON results and their failures."""

import pytest

from climstack import spack
from climstack.errors import ClimstackError


def test_an_instance_sets_and_unsets_its_variables_over_the_base_environment():
    centre = spack.Spack(
        variables={"SPACK_USER_CONFIG_PATH": "/c", "SPACK_DISABLE_LOCAL_CONFIG": None}
    )
    base = {"PATH": "/bin", "SPACK_DISABLE_LOCAL_CONFIG": "1"}
    assert centre.environ(base) == {"PATH": "/bin", "SPACK_USER_CONFIG_PATH": "/c"}
    assert spack.DEFAULT.environ(base) == base


def test_scopes_come_before_the_environment_and_the_arguments(tmp_path):
    scoped = spack.DEFAULT.scoped(tmp_path / "a").scoped(tmp_path / "b")
    assert scoped.command("find", env=tmp_path / "env") == [
        str(spack.SPACK),
        *("-C", str(tmp_path / "a"), "-C", str(tmp_path / "b")),
        *("-e", str(tmp_path / "env"), "find"),
    ]
    assert spack.DEFAULT.scopes == ()  # a scoped copy, the default unchanged


def test_a_script_returns_the_json_of_its_last_line(tmp_path):
    script = tmp_path / "answer.py"
    script.write_text("import json, sys\nprint('noise')\nprint(json.dumps(sys.argv[1:]))\n")
    assert spack.DEFAULT.python(script, "x", "y") == ["x", "y"]


def test_a_script_printing_no_json_is_named_with_the_fix(tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text("print('hello')\n")
    with pytest.raises(spack.ScriptFailed) as error:
        spack.DEFAULT.python(script)
    message = str(error.value)
    assert f"python {script}" in message and "printed no JSON last" in message
    assert "hello" in message and "fix:" in message


def test_a_failing_script_gives_its_exit_and_error(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("raise SystemExit('the cause')\n")
    with pytest.raises(spack.ScriptFailed) as error:
        spack.DEFAULT.python(script)
    assert "failed (exit 1)" in str(error.value) and "the cause" in error.value.output


def test_an_unknown_script_name_is_refused_before_spack_runs():
    with pytest.raises(ClimstackError) as error:
        spack.DEFAULT.python("no_such_script.py")
    assert str(spack.SCRIPTS / "no_such_script.py") in str(error.value)
    assert str(spack.SCRIPTS) in error.value.fix
