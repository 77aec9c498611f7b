"""feedledger: an honest, replayable, bitemporal history of external data feeds."""

__version__ = "0.1.0"
