"""The one exception type for bad input, so the CLI can turn it into a clean exit 2."""


class InputError(ValueError):
    """Bad user input: the message is one line naming the field, column or value at fault."""


class Uncertifiable(InputError):
    """The reference f* is not accurate enough to judge the requested tolerance: the run is
    refused (the CLI exits 2; a sweep records the status `uncertifiable`)."""
