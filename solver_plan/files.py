"""Reading inputs and writing outputs safely.

Inputs are read only from regular files of bounded size: a FIFO would block for ever, a device such
as /dev/zero has no end, and /proc or /sys files report a size of 0 whatever they hold; each is
refused by name before a byte is read.

Outputs go only to the path the user named: a regular file (or a missing one) is written to a
temporary file beside it and renamed over it, so readers (and a resumed batch) never see half a
file; a symbolic link is followed and its target written (the link stays a link); a character
device (/dev/null, /dev/stdout) or a FIFO with a reader is written through, never replaced; block
devices and sockets are refused. Missing folders are never created: the user names an existing
folder. When a finished result cannot be written, it is kept in a file in the temporary folder and
the error says where.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path

from solver_plan.errors import InputError
from solver_plan.jsontext import json_text
from solver_plan.units import MIB

MAX_INPUT_BYTES = 64 * MIB  # far above any JSON input of ours; refuse before parsing gigabytes
NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS)
PSEUDO_FILE_SYSTEMS = ("/proc", "/sys")  # files there claim 0 bytes (or lie about their size)


def _a(what: str) -> str:
    """'a YAML file', 'an ONNX model'."""
    return f"an {what}" if what[:1].lower() in "aeiou" or what.startswith(("ONNX", "HF", "MILP")) else f"a {what}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _pseudo_root(path: Path) -> str | None:
    """'/proc' if `path` (links followed) lies in /proc, and so on; None for ordinary files."""
    resolved = os.path.realpath(path)
    return next((root for root in PSEUDO_FILE_SYSTEMS if resolved == root or resolved.startswith(root + "/")), None)


def _open_regular(path: Path, what: str) -> int:
    """A descriptor of `path` opened for reading, or one `InputError` naming it: missing,
    unreadable, a folder, a FIFO, a device, a socket, a /proc or /sys file. Opened without blocking
    (a FIFO would wait for a writer)."""
    where = str(path)
    root = _pseudo_root(path)
    if root is not None:
        raise InputError(f"is a file in {root}, not a regular file; {_a(what)} is read from regular files only", where)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise InputError(f"is a folder, expected {_a(what)}", where) from None
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror or exc})", where) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(f"is a folder, expected {_a(what)}", where)
        if not stat.S_ISREG(mode):
            raise InputError(f"is {_kind(mode)}, not a regular file; {_a(what)} is read from regular files only", where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_regular_file(path: str | Path, what: str = "file") -> None:
    """`InputError` unless `path` is a readable regular file (for readers that open it themselves,
    such as onnx.load: a FIFO would block them, /dev/zero never end)."""
    os.close(_open_regular(Path(path), what))


def read_input_bytes(path: str | Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or one `InputError` naming the file
    (see `_open_regular`; too large: more than `limit` bytes, of which at most `limit` + 1 are read)."""
    path = Path(path)
    where = str(path)
    fd = _open_regular(path, what)
    try:
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(MIB, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise InputError(f"{what} is too large (at most {limit} bytes)", where)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror or exc})", where) from None
    finally:
        os.close(fd)


def unique_keys(pairs: list[tuple[str, object]], where) -> dict:
    """json `object_pairs_hook`: a key given twice is an error (JSON parsers silently keep the last)."""
    data: dict = {}
    for key, value in pairs:
        if key in data:
            raise InputError(f"duplicate key {key!r}", str(where))
        data[key] = value
    return data


def decode_text(raw: bytes, where: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is allowed); anything else is one clear error."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError("file is UTF-16 encoded; save it as UTF-8", where)
    if b"\x00" in raw:
        raise InputError("not a text file (it contains NUL bytes)", where)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})", where) from None


def read_json(path: str | Path, what: str = "JSON file"):
    """A JSON document, or one `InputError` naming the file: missing, not a regular file, not UTF-8
    text, malformed, NaN / Infinity literals (not JSON), or nested too deeply for the parser."""

    path = Path(path)
    text = decode_text(read_input_bytes(path, what), str(path))
    if not text.strip():
        raise InputError(f"file is empty (expected a {what})", str(path))

    def refuse_constant(name: str):
        raise InputError(f"{name} is not a JSON number", str(path))

    try:
        return json.loads(text, parse_constant=refuse_constant, object_pairs_hook=lambda pairs: unique_keys(pairs, path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", str(path)) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", str(path)) from None


# --- outputs -------------------------------------------------------------------------------------
def _umask() -> int:
    """The process umask, read without os.umask (which would change it for other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


_OWN_DESCRIPTORS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _own_descriptor(target: str) -> int | None:
    """1 for /dev/stdout, /proc/self/fd/1 or /dev/fd/1: written through this process's own
    descriptor, so the text lands after what was printed (a reopened file would start at 0)."""
    absolute = os.path.abspath(target)
    if absolute in _OWN_DESCRIPTORS:
        return _OWN_DESCRIPTORS[absolute]
    for prefix in ("/proc/self/fd/", f"/proc/{os.getpid()}/fd/", "/dev/fd/"):
        if absolute.startswith(prefix) and absolute[len(prefix):].isdigit():
            return int(absolute[len(prefix):])
    return None


def _write_all(fd: int, text: str) -> None:
    data = text.encode()
    while data:
        data = data[os.write(fd, data):]


def _write_through(target: str, text: str) -> None:
    """Write to an existing character device, FIFO or descriptor in place (O_NONBLOCK: a FIFO
    without a reader is an error, ENXIO, not a hang)."""
    own = _own_descriptor(target)
    if own is not None:
        import sys
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        _write_all(own, text)
        return
    fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
        _write_all(fd, text)
    finally:
        os.close(fd)


def _is_descriptor_link(path: Path) -> bool:
    """/dev/stdout, /proc/self/fd/1 and the like: an open descriptor of this process, written where
    it stands (a shell's `>` file keeps what was printed before), never replaced by a new file."""
    absolute = os.path.abspath(path)
    return absolute.startswith(("/dev/", "/proc/")) and os.path.islink(absolute)


def _replace_atomically(target: str, text: str) -> None:
    """Temporary file in the target's folder, then rename over it."""
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _keep_elsewhere(path: Path, text: str) -> str:
    """Save a finished result that could not be written where asked; returns where it went."""
    try:
        fd, kept = tempfile.mkstemp(prefix=f"solver-plan-{path.stem[:40]}-", suffix=path.suffix[:16])
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        return kept
    except OSError:
        import sys
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return "standard output (above)"


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` as the module docstring says (regular files atomically, links through to
    their target, character devices and FIFOs in place; never a new folder). If it cannot be written,
    the text is kept in the temporary folder and an `InputError` names both paths."""
    path = Path(path)
    try:
        try:
            mode = os.stat(path).st_mode  # links followed: /proc/self/fd/1 is the terminal or pipe it names
        except FileNotFoundError:
            mode = None
        if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or _is_descriptor_link(path)):
            _write_through(str(path), text)
            return
        target = os.path.realpath(path) if path.is_symlink() else str(path)
        if mode is not None and not stat.S_ISREG(mode):
            raise InputError(f"cannot write {str(path)!r}: it is {_kind(mode)}", str(path))
        folder = os.path.dirname(target) or "."
        if not os.path.isdir(folder):
            raise FileNotFoundError(errno.ENOENT, f"folder {folder!r} does not exist")
        _replace_atomically(target, text)
    except OSError as exc:
        why = "no reader on the FIFO" if exc.errno == errno.ENXIO else (exc.strerror or str(exc))
        kept = _keep_elsewhere(path, text)
        raise InputError(f"cannot write the result ({why}); it was kept in {kept}", str(path)) from None


# Larger JSON is written compact: indenting puts every number of a 1,024-device plan on a line of
# its own (16 MB, 1.2 s to encode in Python's indenting encoder against 0.3 s compact, past the
# command's time limit), and nobody reads a million lines.
INDENT_MAX_CHARS = 1_000_000


def write_json_atomic(path: str | Path, data: dict) -> None:
    """Write `data` as JSON to `path` atomically (see `write_text_atomic`): indented, unless its
    compact form exceeds INDENT_MAX_CHARS (decided by size, never by the clock)."""
    text = json_text(data)
    if len(text) <= INDENT_MAX_CHARS:
        text = json.dumps(data, indent=2)
    write_text_atomic(path, text + "\n")


def check_output_path(path: str | Path | None, where: str, suffixes: tuple[str, ...] | None = None,
                      what: str = "") -> None:
    """Fail before any work when an output file could not be written later, or, with `suffixes`,
    when its extension names a format the writer does not produce. Creates nothing, and accepts
    only an existing folder: missing folders are refused, not created."""
    if path is None:
        return
    label = f"cannot write {what + ' ' if what else ''}{str(path)!r}"
    if not str(path).strip():
        raise InputError("empty file name", where)
    if suffixes is not None and Path(path).suffix.lower() not in suffixes:
        raise InputError(f"cannot write {Path(path).suffix or 'a file without extension'} "
                         f"({str(path)!r}); expected one of {', '.join(suffixes)}", where)
    path = Path(path)
    if any(len(os.fsencode(part)) > NAME_MAX for part in path.parts):
        raise InputError(f"{label[:80]}...: a file or folder name is at most {NAME_MAX} bytes", where)
    try:
        mode = os.stat(path).st_mode  # links followed
    except OSError:
        mode = None
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(f"{label}: it is a folder, expected a file name", where)
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{label}: it is {_kind(mode)}", where)
    if mode is not None and stat.S_ISFIFO(mode):
        return  # written through when the result is ready (a reader may attach until then)
    if mode is not None and stat.S_ISCHR(mode):
        if not os.access(target, os.W_OK):
            raise InputError(f"{label} (permission denied)", where)
        return
    folder = target.parent
    if not folder.exists():
        raise InputError(f"{label}: folder {str(folder)!r} does not exist (create it first)", where)
    check_output_folder(folder, where, label)
    if mode is not None and not os.access(target, os.W_OK):
        raise InputError(f"{label} (permission denied)", where)


def check_output_folder(folder: str | Path, where: str, label: str | None = None) -> None:
    """Fail unless files can be created in `folder`, or, if it is missing, it can be created in its
    parent: the folder the user named may be made, never the folders above it."""
    folder = Path(folder)
    label = label or f"cannot write to {str(folder)!r}"
    if any(len(os.fsencode(part)) > NAME_MAX for part in folder.parts):
        raise InputError(f"{label[:80]}...: a file or folder name is at most {NAME_MAX} bytes", where)
    existing = folder if folder.exists() else folder.parent
    if not existing.exists():
        raise InputError(f"{label}: folder {str(existing)!r} does not exist (create it first)", where)
    if not existing.is_dir():
        raise InputError(f"{label}: {str(existing)!r} is a file, not a folder", where)
    try:  # a probe file catches read-only file systems too, which os.access misses
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{label} ({exc.strerror or exc})", where) from None
