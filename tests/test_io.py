"""Files and directories written whole or not at all (`trainfit.io`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trainfit.errors import TrainfitError
from trainfit.io import (
    atomic_directory,
    check_writable_directory,
    staged_directories,
    write_atomically,
    write_bytes_atomically,
)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_new_directory_appears_whole_when_the_block_ends(tmp_path: Path) -> None:
    target = tmp_path / "out" / "deep"
    with atomic_directory(target) as temporary:
        write_atomically(temporary / "a.txt", "a")
        (temporary / "sub").mkdir()
        write_atomically(temporary / "sub" / "b.txt", "b")
        assert not target.exists()  # NB: nothing there until the block ends
    assert _tree(tmp_path) == [
        "out",
        "out/deep",
        "out/deep/a.txt",
        "out/deep/sub",
        "out/deep/sub/b.txt",
    ]
    assert (target / "sub" / "b.txt").read_text() == "b"


def test_an_existing_directory_gets_the_files_and_keeps_its_own(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    (tmp_path / "same.txt").write_text("old")
    with staged_directories() as staged:
        temporary = staged.path(tmp_path)
        write_atomically(temporary / "same.txt", "new")
        write_atomically(temporary / "added.txt", "added")
        assert staged.final(temporary / "added.txt") == tmp_path / "added.txt"
    assert _tree(tmp_path) == ["added.txt", "keep.txt", "same.txt"]
    assert (tmp_path / "same.txt").read_text() == "new"


@pytest.mark.parametrize("raised", [TrainfitError("failed"), KeyboardInterrupt()])
def test_a_failure_or_ctrl_c_leaves_nothing_behind(tmp_path: Path, raised: BaseException) -> None:
    (tmp_path / "existing").mkdir()
    with pytest.raises(type(raised)), staged_directories() as staged:
        write_atomically(staged.path(tmp_path / "new" / "dir") / "a.txt", "a")
        write_atomically(staged.path(tmp_path / "existing") / "b.txt", "b")
        raise raised
    assert _tree(tmp_path) == ["existing"]


def test_the_check_of_a_directory_makes_nothing(tmp_path: Path) -> None:
    check_writable_directory(tmp_path / "a" / "b", "report directory")
    assert _tree(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(
        TrainfitError, match=r"cannot write to the report directory .*file: it is a file"
    ):
        check_writable_directory(tmp_path / "file", "report directory")


def test_a_committed_directory_is_not_private(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        with atomic_directory(tmp_path / "out") as temporary:
            write_atomically(temporary / "a.txt", "a")
    finally:
        os.umask(umask)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755


def test_a_private_file_is_its_owners_and_an_output_follows_the_umask(tmp_path: Path) -> None:
    write_bytes_atomically(tmp_path / "private", b"x", private=True)
    write_bytes_atomically(tmp_path / "output", b"x")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "private").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "output").stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_interrupted_write_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_bytes_atomically(tmp_path / "out", b"x")
    assert list(tmp_path.iterdir()) == []


def test_json_ready_turns_enums_tuples_and_non_finite_floats_into_json() -> None:
    import enum
    import json

    from trainfit.io import json_ready

    class Colour(enum.Enum):
        RED = "red"

    value = {"c": Colour.RED, "t": (1, [Colour.RED, float("nan")]), "x": float("inf"), "n": None}
    ready = json_ready(value)
    assert ready == {"c": "red", "t": [1, ["red", "nan"]], "x": "inf", "n": None}
    json.dumps(ready, allow_nan=False)  # NB: raises on a NaN left in
