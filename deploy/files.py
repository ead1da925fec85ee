"""What the generators (``lammer broker-config``, ``lammer floor-config``, the floor's
TLS) share to write their files: a change reported per file, folders and files made with
their mode (and owner) whatever the umask, written whole through a temporary file and a
rename, passwords kept across runs, and the refusal to overwrite files another tool wrote.
Running a generator again keeps what exists and says what it changed.
"""

from __future__ import annotations

import difflib
import grp
import os
import pwd
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal


def foreign_files(paths: Iterable[Path], *, marker: str, tool: str) -> list[str]:
    """A problem for each of ``paths`` that exists and was not written by ``tool`` (its
    first 400 characters lack ``marker``): such a file is never overwritten."""
    problems = []
    for path in paths:
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:400]
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            problems.append(f"--out: cannot read {path}: {exc.strerror}")
            continue
        if marker not in head:
            problems.append(
                f"--out: {path} was not written by {tool}: choose another directory "
                "or move the file away (it is never overwritten)"
            )
    return problems


Status = Literal["created", "updated", "unchanged", "kept", "fixed", "left"]


@dataclass(frozen=True, slots=True)
class Change:
    """What ``generate`` did to one file: ``status``, a detail, and for a text file that
    was updated, its unified diff."""

    path: Path
    status: Status
    detail: str = ""
    diff: tuple[str, ...] = ()

    def line(self, out: Path) -> str:
        """The change as a line of the command's report (the path relative to ``out``)."""
        try:
            shown = str(self.path.relative_to(out)) or "."
        except ValueError:
            shown = str(self.path)
        if not self.detail:
            return f"  {self.status:<9} {shown}"
        return f"  {self.status:<9} {shown:<24} {self.detail}"


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a written file belongs to (set only when running as root)."""

    uid: int
    gid: int


def keep_or_make_password(path: Path, changes: list[Change]) -> str:
    """The password in ``path`` (its first line), kept; or a new one written there (0600).
    ``ValueError`` naming the file when it cannot be read or holds no usable password."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        password = new_password()
        write_new_file(path, password + "\n", 0o600)
        changes.append(Change(path, "created", "new password"))
        return password
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read it ({exc})") from exc
    password = text.split("\n", 1)[0]
    problem = password_problem(password)
    if problem:
        raise ValueError(f"{path}: the password {problem}: delete the file to have a new one made")
    mode = path.stat().st_mode & 0o777
    if mode != 0o600:
        path.chmod(0o600)
        changes.append(Change(path, "fixed", f"mode {mode:04o} -> 0600, password kept"))
    else:
        changes.append(Change(path, "kept", "password kept"))
    return password


def make_dir(path: Path, mode: int, changes: list[Change], *, fix_mode: bool) -> None:
    """Create ``path`` with ``mode`` (whatever the umask); with ``fix_mode`` an existing
    directory gets ``mode`` back, reported in ``changes``."""
    if not path.exists():
        path.mkdir(mode=mode, parents=True)
        path.chmod(mode)  # mkdir's mode is masked by the umask
        return
    current = path.stat().st_mode & 0o777
    if fix_mode and current != mode:
        path.chmod(mode)
        changes.append(Change(path, "fixed", f"mode {current:04o} -> {mode:04o}"))


def write_new_file(path: Path, text: str, mode: int) -> None:
    """Write a file that does not exist yet (atomically, with ``mode``)."""
    replace_file(path, text.encode(), mode, None)


def write_file(
    path: Path,
    text: str,
    mode: int,
    owner: Owner | None,
    *,
    detail: str = "",
    show_diff: bool = False,
) -> Change:
    """Write ``text`` to ``path`` unless it holds it already; what was done (with the
    unified diff when ``show_diff`` and the file changed)."""
    data = text.encode()
    try:
        old = path.read_bytes()
    except FileNotFoundError:
        replace_file(path, data, mode, owner)
        return Change(path, "created", detail)
    if old == data:
        fixed = fix_owner_and_mode(path, mode, owner)
        return Change(path, "fixed" if fixed else "unchanged", fixed)
    replace_file(path, data, mode, owner)
    diff: tuple[str, ...] = ()
    if show_diff:
        diff = tuple(
            difflib.unified_diff(
                old.decode(errors="replace").splitlines(),
                text.splitlines(),
                fromfile=f"{path.name} (before)",
                tofile=f"{path.name} (now)",
                lineterm="",
            )
        )
    return Change(path, "updated", detail, diff)


def fix_owner_and_mode(path: Path, mode: int, owner: Owner | None) -> str:
    """Give an unchanged file its mode (and owner) back; what was fixed, or ''."""
    st = path.stat()
    fixes = []
    if st.st_mode & 0o777 != mode:
        path.chmod(mode)
        fixes.append(f"mode {st.st_mode & 0o777:04o} -> {mode:04o}")
    if owner is not None and (st.st_uid, st.st_gid) != (owner.uid, owner.gid):
        os.chown(path, owner.uid, owner.gid)
        fixes.append(f"owner {_names(st.st_uid, st.st_gid)} -> {_names(owner.uid, owner.gid)}")
    return ", ".join(fixes)


def _names(uid: int, gid: int) -> str:
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return f"{user}:{group}"


def replace_file(path: Path, data: bytes, mode: int, owner: Owner | None) -> None:
    """Write ``data`` to ``path`` atomically: a new file with its mode (and owner) set
    before any byte is written, fsynced, renamed over the old one, the directory fsynced."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have removed bits
        if owner is not None:
            os.fchown(fd, owner.uid, owner.gid)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def new_password() -> str:
    """A new random password: 32 URL-safe characters (192 bits, ``secrets``)."""
    return secrets.token_urlsafe(24)


_PASSWORD_MIN: Final = 16


def password_problem(password: str) -> str | None:
    """Why ``password`` (read from a credentials file) cannot be used, or None: too short,
    or a character that could break a generated line."""
    if len(password) < _PASSWORD_MIN:
        return f"is shorter than {_PASSWORD_MIN} characters"
    if any(c.isspace() or not c.isprintable() for c in password):
        return "holds spaces or control characters"
    return None
