"""Which object of a link map (climstack.bind.loader) each imported symbol binds to.

ld.so looks every symbol up in the global scope: the link map in load order (the program,
the preloads, then the libraries breadth first), and the first object that defines it wins,
whoever asks, provided its definition is of the version the import names (if any). An
executable's copies of library data (copy relocations: `mpipriv1_`,
`MPIR_F08_MPI_IN_PLACE`) are filled from the first *other* object that defines them.
"""

from dataclasses import dataclass, field
from typing import Callable

from climstack.bind.loader import Closure, Library


@dataclass
class Binding:
    symbol: str
    provider: Library | None  # None: no object of the process defines it
    importers: list[Library] = field(default_factory=list)


def bindings(closure: Closure, wanted: Callable[[str], bool]) -> dict[str, Binding]:
    """symbol -> its Binding, for every `wanted` symbol some object of the map imports."""
    scope = closure.objects
    found: dict[str, Binding] = {}
    for obj in scope:
        copies = obj.info.objects if obj is closure.root and obj.info.interpreter else set()
        for symbol in obj.info.imports | copies:
            if not wanted(symbol):
                continue
            if symbol not in found:
                skip = closure.root if symbol in copies else None
                version = obj.info.import_versions.get(symbol, "")
                provider = next(
                    (o for o in scope if o is not skip and o.info.defines(symbol, version)), None
                )
                found[symbol] = Binding(symbol, provider)
            found[symbol].importers.append(obj)
    return found
