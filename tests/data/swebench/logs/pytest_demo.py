import enum

import pytest


class MouseButton(enum.Enum):
    LEFT = 1
    RIGHT = 3


@pytest.fixture
def broken():
    raise RuntimeError("fixture erroring on purpose")


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert 1 + 1 == 3, "failing on purpose"


def test_errors(broken):
    pass


@pytest.mark.skip(reason="skipped on purpose")
def test_skipped():
    pass


@pytest.mark.xfail(reason="expected to fail")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="expected to fail, but passes")
def test_xpass():
    pass


@pytest.mark.parametrize("text", ["a b", "c"])
def test_param(text):
    assert text != "a b"


@pytest.mark.parametrize("button", [MouseButton.LEFT, MouseButton.RIGHT])
def test_button(button):
    assert button.value in (1, 3)


@pytest.mark.parametrize("path", ["/tmp/pytest-of-root/pytest-7/data0/input.txt"])
def test_path(path):
    assert path.endswith(".txt")
