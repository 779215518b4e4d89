"""The one exception type for bad input, so the CLI can turn it into a clean exit 2.

Here, in the installed package (not in datasets/), so that every layer (datasets, optimizers,
the framework folders, the engine, the studies) imports it without importing a layer's
package: `datasets`' own import makes pandas and SciPy, 0.6 s of a command's start."""


class InputError(ValueError):
    """Bad user input: the message is one line naming the field, column or value at fault."""


class Uncertifiable(InputError):
    """The reference f* is not accurate enough to judge the requested tolerance: the run is
    refused (the CLI exits 2; a sweep records the status `uncertifiable`)."""


class LibraryFailure(RuntimeError):
    """A library's optimizer failed inside its own update (Keras's Muon on float64, say): the
    message is one line naming the optimizer and the library's cause (the CLI exits 1; a sweep
    records the status `failed` with that line)."""


def first_line(error) -> str:
    """An exception's message as one line (its first), or its type's name when it has none."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def failure_line(error: BaseException) -> str:
    """A failure (inside a library, most often) as one line: its type and its first line, and
    where Keras wraps a layer's exception ("Exception encountered when calling ..."), the wrapped
    message too, since that first line alone names no cause."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    if len(lines) > 1 and lines[0].startswith("Exception encountered when calling"):
        text += f" {lines[1]}"
    return text[:500]
