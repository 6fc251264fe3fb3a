"""Conversions between integers and their written forms."""

ROMAN = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
MAX_ROMAN = 3999
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
        "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
        "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SCALES = [(10 ** 9, "billion"), (10 ** 6, "million"), (1000, "thousand")]


def to_roman(n):
    if not isinstance(n, int) or not 1 <= n <= MAX_ROMAN:
        raise ValueError(f"Roman numerals cover 1..{MAX_ROMAN}, got {n!r}")
    out = []
    for value, symbol in ROMAN:
        count, n = divmod(n, value)
        out.append(symbol * count)
    return "".join(out)


def from_roman(text):
    """Parse a numeral; only the canonical form (what to_roman writes) is accepted."""
    s = text.strip().upper()
    if not s or any(ch not in VALUES for ch in s):
        raise ValueError(f"not a Roman numeral: {text!r}")
    total = 0
    for i, ch in enumerate(s):
        value = VALUES[ch]
        if i + 1 < len(s) and VALUES[s[i + 1]] > value:
            total -= value
        else:
            total += value
    if not 1 <= total <= MAX_ROMAN or to_roman(total) != s:
        raise ValueError(f"not a canonical Roman numeral: {text!r}")
    return total


def _below_thousand(n):
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [ONES[hundreds], "hundred"]
    if rest:
        if hundreds:
            words.append("and")
        if rest < 20:
            words.append(ONES[rest])
        else:
            tens, ones = divmod(rest, 10)
            words.append(TENS[tens] + ("-" + ONES[ones] if ones else ""))
    return words


def to_words(n):
    """English words, British style ('one hundred and five')."""
    if not isinstance(n, int):
        raise TypeError("to_words needs an int")
    if n == 0:
        return ONES[0]
    if n < 0:
        return "minus " + to_words(-n)
    words = []
    for value, name in SCALES:
        count, n = divmod(n, value)
        if count:
            words += _below_thousand(count) + [name]
    if n:
        if words and n < 100:
            words.append("and")
            words += _below_thousand(n)
        else:
            words += _below_thousand(n)
    return " ".join(words)


def ordinal(n):
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 112th ..."""
    if n % 100 in (11, 12, 13):
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
