"""jpathkit: query nested JSON data with path expressions."""

from jpathkit.path import PathError, compile_path, query, set_path

__all__ = ["PathError", "compile_path", "query", "set_path"]
