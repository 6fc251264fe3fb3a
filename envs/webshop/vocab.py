"""The words the generated catalog is made of: categories, product types, attributes, options.

Each category has a few product types, a pool of attributes (phrases a shopper asks for:
"sulfate free", "machine washable") and one or two option dimensions (size, color, flavor...).
Option values are distinct within a category, and distinct from the site's own buttons, so a
click on a label is never ambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass

COLORS = ("black", "white", "navy blue", "red", "grey", "beige", "pink", "green", "brown", "purple", "gold", "silver")
APPAREL_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
PACKS = ("pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12")


@dataclass(frozen=True)
class Category:
    name: str
    types: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]  # (dimension, values)
    price: tuple[float, float]  # low, high in dollars


def _c(name, types, attributes, options, price) -> Category:
    return Category(name, tuple(types), tuple(attributes), tuple((d, tuple(v)) for d, v in options), price)


CATEGORIES: tuple[Category, ...] = (
    _c("hair care", ["hair extension", "shampoo", "hair oil", "hair dryer"],
       ["natural looking", "sulfate free", "paraben free", "long lasting", "heat resistant", "for dry hair",
        "travel size", "easy to use", "cruelty free"],
       [("color", ["natural black", "dark brown", "ash blonde", "auburn", "platinum"]),
        ("size", ["12 inch", "16 inch", "20 inch", "24 inch"])], (6, 60)),
    _c("skin care", ["face moisturizer", "sunscreen", "face serum", "cleansing balm"],
       ["fragrance free", "non comedogenic", "for sensitive skin", "oil free", "anti aging", "hyaluronic acid",
        "dermatologist tested", "vegan", "spf 50"],
       [("size", ["1 fl oz", "1.7 fl oz", "3.4 fl oz", "6.8 fl oz"])], (8, 70)),
    _c("makeup", ["lipstick", "foundation", "mascara", "eyeshadow palette"],
       ["long lasting", "waterproof", "cruelty free", "matte finish", "smudge proof", "lightweight",
        "paraben free", "highly pigmented"],
       [("color", ["nude", "ruby red", "mauve", "coral", "warm beige", "ivory", "espresso"])], (5, 45)),
    _c("fragrance", ["eau de parfum", "body mist", "cologne"],
       ["long lasting", "travel size", "gift set", "alcohol free", "floral scent", "woody scent", "fresh scent"],
       [("size", ["1 oz", "1.7 oz", "3.4 oz", "6.7 oz"])], (12, 120)),
    _c("oral care", ["toothpaste", "electric toothbrush", "mouthwash"],
       ["fluoride free", "whitening", "for sensitive teeth", "alcohol free", "travel size", "rechargeable",
        "mint flavor", "dentist recommended"],
       [("size", PACKS[:4])], (4, 80)),
    _c("men's clothing", ["t-shirt", "dress shirt", "jeans", "hoodie"],
       ["machine washable", "slim fit", "relaxed fit", "cotton blend", "moisture wicking", "long sleeve",
        "wrinkle free", "button down"],
       [("size", APPAREL_SIZES), ("color", COLORS[:9])], (12, 70)),
    _c("women's clothing", ["dress", "blouse", "leggings", "cardigan"],
       ["machine washable", "high waist", "long sleeve", "short sleeve", "stretch fabric", "loose fit",
        "floral print", "v neck", "hand wash only"],
       [("size", APPAREL_SIZES), ("color", COLORS)], (14, 80)),
    _c("shoes", ["running shoe", "sandal", "ankle boot", "slipper"],
       ["non slip", "lightweight", "memory foam", "waterproof", "arch support", "breathable", "wide width",
        "rubber sole"],
       [("size", ["size 6", "size 7", "size 8", "size 9", "size 10", "size 11", "size 12"]),
        ("color", COLORS[:8])], (18, 120)),
    _c("jewelry", ["necklace", "earrings", "bracelet", "ring"],
       ["sterling silver", "hypoallergenic", "gift box", "adjustable", "nickel free", "gold plated",
        "handmade", "minimalist"],
       [("color", ["gold tone", "silver tone", "rose gold"])], (9, 90)),
    _c("bags", ["backpack", "tote bag", "crossbody bag", "wallet"],
       ["water resistant", "vegan leather", "rfid blocking", "multiple pockets", "lightweight",
        "adjustable strap", "laptop compartment", "zipper closure"],
       [("color", COLORS[:10])], (15, 110)),
    _c("furniture", ["office chair", "bookshelf", "coffee table", "bed frame"],
       ["easy assembly", "solid wood", "space saving", "metal frame", "ergonomic", "height adjustable",
        "mid century modern", "storage space"],
       [("color", ["black", "white", "walnut", "oak", "grey"])], (40, 400)),
    _c("bedding", ["comforter set", "pillow", "sheet set", "blanket"],
       ["machine washable", "hypoallergenic", "down alternative", "breathable", "100% cotton", "cooling",
        "deep pocket", "ultra soft"],
       [("size", ["twin", "full", "queen", "king", "california king"]), ("color", COLORS[:8])], (20, 150)),
    _c("kitchen", ["frying pan", "knife set", "cutting board", "food storage container"],
       ["dishwasher safe", "non stick", "bpa free", "oven safe", "stainless steel", "induction compatible",
        "easy to clean", "heat resistant"],
       [("size", ["8 inch", "10 inch", "12 inch", "14 inch"])], (10, 130)),
    _c("home decor", ["table lamp", "wall clock", "throw pillow cover", "area rug"],
       ["modern design", "easy to clean", "battery operated", "silent movement", "farmhouse style",
        "boho style", "dimmable", "non slip backing"],
       [("color", COLORS[:10])], (12, 160)),
    _c("snacks", ["potato chips", "granola bar", "mixed nuts", "beef jerky"],
       ["gluten free", "low sodium", "high protein", "non gmo", "keto friendly", "no added sugar",
        "individually wrapped", "kosher"],
       [("flavor", ["original", "sea salt", "barbecue", "honey roasted", "spicy", "teriyaki"]),
        ("size", PACKS)], (3, 40)),
    _c("beverages", ["green tea", "coffee beans", "sparkling water", "protein shake"],
       ["organic", "caffeine free", "sugar free", "non gmo", "fair trade", "decaf", "zero calorie",
        "ready to drink"],
       [("flavor", ["unflavored", "lemon", "vanilla", "chocolate", "mango", "dark roast"]),
        ("size", PACKS)], (5, 50)),
    _c("pantry", ["olive oil", "pasta", "hot sauce", "honey"],
       ["organic", "gluten free", "non gmo", "raw", "cold pressed", "kosher", "vegan", "product of italy"],
       [("size", ["8 oz", "16 oz", "32 oz", "64 oz"])], (4, 45)),
    _c("pet supplies", ["dog food", "cat litter", "dog toy", "cat tree"],
       ["grain free", "for small breeds", "durable", "unscented", "easy to clean", "natural ingredients",
        "for large breeds", "clumping"],
       [("size", ["small", "medium", "large", "x-large"])], (8, 120)),
    _c("electronics", ["wireless earbuds", "bluetooth speaker", "phone case", "usb charger"],
       ["noise cancelling", "fast charging", "waterproof", "long battery life", "shockproof", "portable",
        "bluetooth 5.3", "compact design"],
       [("color", COLORS[:6])], (10, 150)),
    _c("computer accessories", ["wireless mouse", "mechanical keyboard", "laptop stand", "monitor"],
       ["ergonomic", "rgb backlit", "usb c", "adjustable height", "plug and play", "silent click",
        "aluminum alloy", "foldable"],
       [("color", ["black", "white", "space grey", "pink"])], (12, 300)),
    _c("toys", ["building blocks", "plush toy", "jigsaw puzzle", "remote control car"],
       ["for ages 3 and up", "educational", "non toxic", "rechargeable", "soft and cuddly", "gift for kids",
        "battery included", "stem toy"],
       [("size", ["100 pieces", "300 pieces", "500 pieces", "1000 pieces"])], (8, 90)),
    _c("sports", ["yoga mat", "dumbbell", "water bottle", "resistance band"],
       ["non slip", "eco friendly", "leak proof", "insulated", "bpa free", "portable", "heavy duty",
        "with carrying strap"],
       [("color", COLORS[:8]), ("size", ["light", "medium weight", "heavy"])], (8, 90)),
    _c("outdoor", ["camping tent", "sleeping bag", "daypack", "headlamp"],
       ["waterproof", "lightweight", "easy setup", "compact", "rechargeable", "for cold weather",
        "windproof", "compression sack"],
       [("size", ["1 person", "2 person", "4 person", "6 person"])], (15, 200)),
    _c("garden", ["garden hose", "planter", "pruning shears", "bird feeder"],
       ["rust resistant", "uv resistant", "drainage hole", "heavy duty", "lightweight", "easy to hang",
        "ergonomic grip", "weather resistant"],
       [("size", ["25 ft", "50 ft", "75 ft", "100 ft"])], (9, 80)),
    _c("baby", ["diapers", "baby wipes", "baby bottle", "teether"],
       ["hypoallergenic", "bpa free", "unscented", "for sensitive skin", "dishwasher safe", "anti colic",
        "plant based", "extra absorbent"],
       [("size", ["newborn", "size 1", "size 2", "size 3", "size 4"])], (6, 60)),
    _c("office supplies", ["notebook", "gel pen", "desk organizer", "sticky notes"],
       ["acid free paper", "quick dry", "refillable", "bulk pack", "recycled material", "college ruled",
        "assorted colors", "smooth writing"],
       [("size", ["a5", "a4", "letter size", "pocket size"])], (3, 35)),
)

#: Categories never seen in training tasks: the `heldout_unseen` split draws only from these.
UNSEEN_CATEGORIES = ("fragrance", "garden", "baby", "office supplies")

BRAND_SYLLABLES = ("lu", "mi", "ra", "ko", "ve", "ta", "no", "zi", "pe", "sa", "do", "fi", "ga", "ne",
                   "bo", "ly", "xo", "qu", "ar", "el", "on", "is", "um", "ex")

FEATURE_EXTRAS = (
    "Ships in recyclable packaging.",
    "Backed by a 30 day return policy.",
    "Designed and tested in the USA.",
    "Customer support available 7 days a week.",
    "Makes a thoughtful gift.",
    "Quality checked before shipping.",
)

DESCRIPTION_OPENERS = (
    "Meet the {brand} {type}, made for everyday use.",
    "The {brand} {type} brings quality you can count on.",
    "Upgrade your routine with this {type} from {brand}.",
    "{brand} designed this {type} with care and attention to detail.",
)
