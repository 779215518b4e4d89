"""The one exception type for bad input, so the CLI can turn it into a clean exit 2."""


class InputError(ValueError):
    """Bad user input: the message is one line naming the field, column or value at fault."""
