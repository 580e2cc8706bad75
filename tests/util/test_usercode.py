"""A user's code's errors as theirs: the object and method, the task and step, their own frames."""

from __future__ import annotations

import pickle

import pytest

from cir.util.errors import CirError
from cir.util.usercode import UserCodeError, import_error, is_user_file, note_where, user_code_error


class Env:
    def restore(self, snapshot):
        return self._helper(snapshot)

    def _helper(self, snapshot):
        raise ValueError(f"cannot restore {snapshot}")


def _raised(call):
    """What ``call()`` raised, its traceback from the call on (as cir catches what it called)."""
    try:
        call()
    except BaseException as err:  # noqa: BLE001 - what the test looks at
        err.__traceback__ = err.__traceback__.tb_next.tb_next  # neither this frame nor the lambda
        return err
    raise AssertionError("nothing raised")


def test_an_error_of_the_users_method_names_it_the_task_and_the_step_and_keeps_their_frames() -> None:
    err = _raised(lambda: Env().restore(7))
    note_where(err, step=4)
    note_where(err, task="t-1", step=9)  # an outer layer never overrides what an inner one said
    user = user_code_error(err)
    assert isinstance(user, UserCodeError) and isinstance(user, CirError)
    assert str(user) == "Env.restore raised ValueError: cannot restore 7 (task t-1, step 4)"
    assert "test_usercode.py" in user.frames and "in _helper" in user.frames
    assert "raise ValueError" in user.frames and "Traceback" not in user.frames
    assert "Traceback" in user.trace  # the whole of it, for --traceback
    assert user.lines() == [user.frames.rstrip("\n"), "  (your code's frames; cir's with --traceback)"]
    assert user.lines(full=True) == [user.trace.rstrip("\n")]


def test_a_user_code_error_crosses_a_process_boundary_as_itself() -> None:
    user = user_code_error(_raised(lambda: Env().restore(1)))
    back = pickle.loads(pickle.dumps(user))
    assert type(back) is UserCodeError and str(back) == str(user) and back.frames == user.frames


def test_cirs_own_errors_and_interrupts_are_not_the_users() -> None:
    from cir.pairs.settings import ReplaySettings

    assert user_code_error(_raised(lambda: ReplaySettings(delays=(-1,)))) is None  # a CirError
    assert user_code_error(KeyboardInterrupt()) is None
    assert user_code_error(_raised(lambda: ReplaySettings.__init__(None))) is None  # raised in cir, no user frame
    assert not is_user_file(pytest.__file__) and not is_user_file("<string>") and is_user_file(__file__)


def test_sys_exit_in_the_users_code_is_an_error() -> None:
    def leave():
        raise SystemExit(0)

    user = user_code_error(_raised(lambda: leave()))
    assert str(user).startswith("test_sys_exit_in_the_users_code_is_an_error.<locals>.leave raised SystemExit: "
                                "sys.exit(0) was called")


def test_an_import_error_names_the_import_and_a_syntax_error_its_line(tmp_path) -> None:
    from cir.util.importing import import_module

    (tmp_path / "broken.py").write_text("x = 1\ndef f(:\n    pass\n")
    with pytest.raises(UserCodeError, match=r"^importing .*broken.py raised SyntaxError: .*\(line 2\)$") as caught:
        import_module(str(tmp_path / "broken.py"))
    assert "def f(:" in caught.value.frames
    (tmp_path / "leaves.py").write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(UserCodeError, match=r"^family 'x': importing leaves.py raised SystemExit: sys.exit\(3\)"):
        import_module(str(tmp_path / "leaves.py"), "family 'x': importing leaves.py")
    (tmp_path / "raises.py").write_text("def boom():\n    raise RuntimeError('at import')\nboom()\n")
    code = compile((tmp_path / "raises.py").read_text(), str(tmp_path / "raises.py"), "exec")
    err = import_error(_raised(lambda: exec(code, {})), "importing raises.py")
    assert str(err) == "importing raises.py raised RuntimeError: at import" and "in boom" in err.frames
    with pytest.raises(ModuleNotFoundError):  # a module that is not there: the caller names it
        import_module(str(tmp_path / "absent.py"))
