"""Errors the lab raises for bad input. Each message names the problem and the fix."""


class LabError(ValueError):
    """A user-facing error: the message says what is wrong and what to do about it."""


class UnknownNameError(LabError, KeyError):
    """A registry lookup for a name that is not registered."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return self.args[0] if self.args else ""


class AssetUnavailableError(LabError):
    """An asset could not be fetched or verified; the message says how to provide it by hand."""


class DataValidationError(LabError):
    """A discipline's data (often a user upload) failed validation; the message names the line or file."""


class MappingError(LabError):
    """A token mapping is not injective, leaves the vocabulary, or touches special ids."""
