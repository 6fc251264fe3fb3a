"""INI parsing into an ordered mapping of sections to ordered key/value mappings."""

import re

TRUE_WORDS = {"1", "yes", "true", "on"}
FALSE_WORDS = {"0", "no", "false", "off"}
COMMENT_PREFIXES = ("#", ";")
DEFAULT_SECTION = "DEFAULT"
_REFERENCE = re.compile(r"\$\{(?:([^:}]+):)?([^}]+)\}")
MAX_DEPTH = 10


class ParseError(ValueError):
    def __init__(self, message, line):
        super().__init__(f"line {line}: {message}")
        self.line = line


class Config:
    def __init__(self):
        self.sections = {DEFAULT_SECTION: {}}

    def section_names(self):
        return [s for s in self.sections if s != DEFAULT_SECTION]

    def has(self, section, key):
        return key in self.sections.get(section, {}) or key in self.sections[DEFAULT_SECTION]

    def raw(self, section, key):
        if section not in self.sections:
            raise KeyError(f"no section {section!r}")
        values = self.sections[section]
        if key in values:
            return values[key]
        if key in self.sections[DEFAULT_SECTION]:
            return self.sections[DEFAULT_SECTION][key]
        raise KeyError(f"no key {key!r} in section {section!r}")

    def get(self, section, key, fallback=None):
        try:
            return self._interpolate(section, self.raw(section, key), 0)
        except KeyError:
            if fallback is not None:
                return fallback
            raise

    def _interpolate(self, section, value, depth):
        if depth > MAX_DEPTH:
            raise ValueError("interpolation is too deeply nested")

        def replace(match):
            ref_section = match.group(1) or section
            return self._interpolate(ref_section, self.raw(ref_section, match.group(2)), depth + 1)

        return _REFERENCE.sub(replace, value)

    def get_int(self, section, key):
        return int(self.get(section, key))

    def get_bool(self, section, key):
        word = self.get(section, key).strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"not a boolean: {word!r}")

    def get_list(self, section, key, separator=","):
        return [item.strip() for item in self.get(section, key).split(separator) if item.strip()]

    def set(self, section, key, value):
        self.sections.setdefault(section, {})[key.lower()] = str(value)

    def dumps(self):
        lines = []
        for name, values in self.sections.items():
            if name == DEFAULT_SECTION and not values:
                continue
            if lines:
                lines.append("")
            lines.append(f"[{name}]")
            for key, value in values.items():
                value = value.replace("\n", "\n    ")
                lines.append(f"{key} = {value}")
        return "\n".join(lines) + "\n"


def parse(text):
    config = Config()
    section = None
    last_key = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIXES):
            continue
        if line[0].isspace() and last_key is not None:
            values = config.sections[section]
            values[last_key] = values[last_key] + "\n" + stripped
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]"):
                raise ParseError("unclosed section header", number)
            section = stripped[1:-1].strip()
            if not section:
                raise ParseError("empty section name", number)
            config.sections.setdefault(section, {})
            last_key = None
            continue
        if section is None:
            raise ParseError("key outside of any section", number)
        positions = [p for p in (stripped.find("="), stripped.find(":")) if p != -1]
        if not positions:
            raise ParseError(f"expected 'key = value', got {stripped!r}", number)
        cut = min(positions)
        key = stripped[:cut].strip().lower()
        if not key:
            raise ParseError("empty key", number)
        value = stripped[cut + 1:].strip()
        config.sections[section][key] = value
        last_key = key
    return config
