"""Version numbers as packaging.version reads them, tolerant of the Cray PE's versions that
PEP 440 rejects (`2.6.2-2.5_2.22`, `8..1`, `default`)."""

import re

from packaging.version import InvalidVersion, Version

#: what separates the fields of a Cray version (`2.6.2-2.5_2.22`)
FIELDS = re.compile(r"[.\-_]")


def release(version: str) -> tuple[int, ...]:
    """The release numbers: '3.4a2' -> (3, 4), '9.0.0.113' -> (9, 0, 0, 113); of a version
    PEP 440 rejects, its leading numbers ('2.6.2-2.5_2.22' -> (2, 6, 2), 'default' -> ())."""
    try:
        return Version(version).release
    except InvalidVersion:
        numbers = []
        for piece in version.split("."):
            match = re.match(r"\d+", piece)
            if not match:
                break
            numbers.append(int(match.group()))
            if match.group() != piece:  # a suffix (a2, rc1, -2) ends the release
                break
        return tuple(numbers)


def sort_key(version: str) -> tuple:
    """Oldest first, in the order the PE's readers always used: the leading numeric fields
    (apart by '.', '-' or '_') compare as a packaging Version, the one with fewer of them
    first when they are equal but for trailing zeros (24.03 before 24.03.0); then the
    fields after them, each a number or -1 (so 8.1.27.rc1 sorts after 8.1.27, unlike in
    PEP 440). A version without a leading number (`default`, `latest`) sorts first."""
    fields = [int(f) if f.isascii() and f.isdigit() else -1 for f in FIELDS.split(version)]
    count = next((i for i, field in enumerate(fields) if field < 0), len(fields))
    numbers = Version(".".join(map(str, fields[:count])) if count else "0")
    return count > 0, numbers, count, tuple(fields[count:])
