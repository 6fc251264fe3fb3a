"""inikit: read and write INI configuration files."""

from inikit.parser import Config, ParseError, parse

__all__ = ["Config", "ParseError", "parse"]
