"""Fictional names and words for the generated world.

Names are built from syllables so that no real person, place or company is named: a model
cannot know any fact about them in advance, which is what makes retrieval necessary. Every
function draws from the numpy Generator it is given, so a world seed fixes every name.
"""

from __future__ import annotations

import numpy as np

_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kl", "l", "m", "n", "p", "r", "s", "st",
           "t", "th", "tr", "v", "w", "z", "sh", "j"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia", "ei", "ou", "y"]
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "m", "nd", "rk", "st", "x", "v"]

OCCUPATIONS = ["architect", "novelist", "painter", "film director", "composer", "engineer", "chemist",
               "journalist", "economist", "physician", "mathematician", "photographer", "sculptor",
               "poet", "historian", "actor", "lawyer", "botanist", "astronomer", "diplomat"]
# Creators of each kind of work; the occupations above are weighted so that each has plenty.
CREATOR_OCCUPATION = {"novel": "novelist", "film": "film director", "album": "composer", "painting": "painter"}
WORK_KINDS = ("novel", "film", "album", "painting")
GENRES = {
    "novel": ["mystery", "historical", "science fiction", "romance", "satirical", "gothic", "adventure"],
    "film": ["drama", "comedy", "thriller", "documentary", "western", "musical", "horror"],
    "album": ["jazz", "folk", "electronic", "orchestral", "rock", "ambient", "choral"],
    "painting": ["landscape", "portrait", "still life", "abstract", "allegorical", "seascape", "genre"],
}
PUBLISHER_INDUSTRY = {"novel": "publishing", "film": "film production", "album": "music recording",
                      "painting": "art dealing"}
INDUSTRIES = ["publishing", "film production", "music recording", "art dealing", "shipbuilding", "textiles",
              "banking", "insurance", "steel", "railways", "pharmaceuticals", "brewing", "software",
              "agriculture", "telecommunications", "glassmaking"]
_COMPANY_SUFFIXES = ["Works", "Holdings", "Group", "& Sons", "Company", "Partners", "Industries", "Press",
                     "Studios", "Records", "Gallery", "Bank", "Foundry", "Mills", "Lines", "Brothers"]
_ADJECTIVES = ["Silent", "Crimson", "Hollow", "Last", "Golden", "Broken", "Salt", "Winter", "Distant",
               "Burning", "Quiet", "Lost", "Paper", "Iron", "Glass", "Bitter", "Sleeping", "Northern",
               "Velvet", "Restless", "Pale", "Wandering", "Hidden", "Amber", "Drowned", "Scarlet", "Early",
               "Second", "Shallow", "Endless", "Tender", "Frozen", "Painted", "Secret", "Wild", "Narrow",
               "Silver", "Empty", "Green", "Forgotten", "Midnight", "Ashen", "Crooked", "Bright", "Small",
               "Heavy", "Open", "Strange", "Slow", "Borrowed"]
_NOUNS = ["Orchard", "Harbour", "Lantern", "Meridian", "Garden", "River", "Tower", "Orchestra", "Mirror",
          "Letter", "Winter", "Country", "Bridge", "Island", "Season", "Archive", "Crossing", "Voyage",
          "Cathedral", "Market", "Shore", "Horizon", "Station", "Furnace", "Meadow", "Carnival", "Lighthouse",
          "Engine", "Quarry", "Forest", "Kingdom", "Clockmaker", "Widow", "Cartographer", "Heir", "Signal",
          "Compass", "Hour", "Atlas", "Ferry", "Chapel", "Vineyard", "Weaver", "Parade", "Observatory",
          "Ledger", "Tide", "Fortress", "Anthem", "Silence"]


def _syllable(rng: np.random.Generator) -> str:
    return (_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
            + _CODAS[rng.integers(len(_CODAS))])


def word(rng: np.random.Generator, syllables: tuple[int, int] = (2, 3)) -> str:
    n = int(rng.integers(syllables[0], syllables[1] + 1))
    return "".join(_syllable(rng) for _ in range(n)).capitalize()


def unique_words(rng: np.random.Generator, count: int, syllables: tuple[int, int], taken: set[str]) -> list[str]:
    """`count` distinct made-up words not in `taken` (which is updated)."""
    out = []
    while len(out) < count:
        w = word(rng, syllables)
        if w not in taken and 4 <= len(w) <= 12:
            taken.add(w)
            out.append(w)
    return out


def work_title(rng: np.random.Generator, places: list[str], surnames: list[str]) -> str:
    form = int(rng.integers(5))
    adj = _ADJECTIVES[rng.integers(len(_ADJECTIVES))]
    noun = _NOUNS[rng.integers(len(_NOUNS))]
    if form == 0:
        return f"The {adj} {noun}"
    if form == 1:
        return f"{adj} {noun}"
    if form == 2:
        return f"The {noun} of {places[rng.integers(len(places))]}"
    if form == 3:
        return f"{surnames[rng.integers(len(surnames))]}'s {noun}"
    return f"{article(adj).capitalize()} {adj} {noun} in {places[rng.integers(len(places))]}"


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def company_name(rng: np.random.Generator, industry: str, places: list[str], surnames: list[str]) -> str:
    base = places[rng.integers(len(places))] if rng.random() < 0.5 else surnames[rng.integers(len(surnames))]
    if rng.random() < 0.4:
        return f"{base} {industry.split()[0].capitalize()}"
    return f"{base} {_COMPANY_SUFFIXES[rng.integers(len(_COMPANY_SUFFIXES))]}"
