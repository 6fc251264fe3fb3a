"""Line layout on words separated by whitespace."""


def _chunks(word, width):
    return [word[i:i + width] for i in range(0, len(word), width)]


def wrap(text, width, break_long_words=True):
    """Greedy wrapping: each line holds as many words as fit in `width` characters."""
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    current = []
    length = 0
    for word in text.split():
        pieces = _chunks(word, width) if break_long_words and len(word) > width else [word]
        for piece in pieces:
            needed = len(piece) if not current else length + 1 + len(piece)
            if current and needed > width:
                lines.append(" ".join(current))
                current = [piece]
                length = len(piece)
            else:
                current.append(piece)
                length = needed
    if current:
        lines.append(" ".join(current))
    return lines


def fill(text, width):
    return "\n".join(wrap(text, width))


def justify(text, width):
    """Wrap, then pad every line but the last with spaces between words (extra spaces go to
    the leftmost gaps) so that it is exactly `width` wide."""
    lines = wrap(text, width)
    out = []
    for i, line in enumerate(lines):
        words = line.split(" ")
        if i == len(lines) - 1 or len(words) == 1:
            out.append(line)
            continue
        gaps = len(words) - 1
        spaces = width - sum(len(w) for w in words)
        base, extra = divmod(spaces, gaps)
        parts = []
        for j, word in enumerate(words[:-1]):
            parts.append(word + " " * (base + (1 if j < extra else 0)))
        parts.append(words[-1])
        out.append("".join(parts))
    return out


def center(line, width, fillchar=" "):
    """Center a line; an odd leftover space goes to the right."""
    if len(fillchar) != 1:
        raise ValueError("fillchar must be a single character")
    total = width - len(line)
    if total <= 0:
        return line
    left = total // 2
    right = total - left
    return fillchar * left + line + fillchar * right


def indent(text, prefix, first_prefix=None):
    """Prefix every non-blank line; the first line may get its own prefix."""
    out = []
    for i, line in enumerate(text.split("\n")):
        if not line.strip():
            out.append(line)
            continue
        p = first_prefix if (i == 0 and first_prefix is not None) else prefix
        out.append(p + line)
    return "\n".join(out)


def shorten(text, width, placeholder=" [...]"):
    """Collapse whitespace and cut at a word boundary so the result fits in `width`."""
    words = text.split()
    joined = " ".join(words)
    if len(joined) <= width:
        return joined
    if len(placeholder) > width:
        raise ValueError("placeholder is longer than the width")
    kept = []
    length = 0
    for word in words:
        extra = len(word) if not kept else len(word) + 1
        if length + extra + len(placeholder) > width:
            break
        kept.append(word)
        length += extra
    return " ".join(kept) + placeholder if kept else placeholder.lstrip()
