"""What the generated stores sell and who shops there, by split.

Each split has a catalog of its own (train: clothing, valid: home and kitchen, test: electronics
and outdoor gear), so no task of one split shares a product with a task of another: CIR's
fitting cohort (valid) and its held-out cohort (test) share no layout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Product:
    """A product: its name, category, base price and its option dimensions (two each)."""

    name: str
    category: str
    price: float
    dims: tuple[tuple[str, tuple[str, ...]], ...]


CATALOGS: dict[str, tuple[Product, ...]] = {
    "train": (
        Product("Cotton T-Shirt", "clothing", 22.0, (("color", ("white", "black", "navy", "red")),
                                                     ("size", ("S", "M", "L", "XL")))),
        Product("Zip Hoodie", "clothing", 54.0, (("color", ("grey", "black", "green")), ("size", ("S", "M", "L", "XL")))),
        Product("Running Shoes", "shoes", 89.0, (("color", ("black", "white", "blue")), ("size", ("8", "9", "10", "11")))),
        Product("Denim Jeans", "clothing", 64.0, (("fit", ("slim", "regular", "relaxed")), ("waist", ("30", "32", "34", "36")))),
        Product("Knit Beanie", "accessories", 18.0, (("color", ("black", "grey", "red", "mustard")),
                                                    ("material", ("wool", "acrylic")))),
        Product("Rain Jacket", "clothing", 98.0, (("color", ("yellow", "navy", "olive")), ("size", ("S", "M", "L")))),
        Product("Leather Belt", "accessories", 39.0, (("color", ("brown", "black")), ("size", ("S", "M", "L", "XL")))),
        Product("Canvas Sneakers", "shoes", 58.0, (("color", ("white", "red", "navy")), ("size", ("7", "8", "9", "10")))),
    ),
    "valid": (
        Product("Electric Kettle", "kitchen", 49.0, (("capacity", ("1.0 l", "1.7 l")), ("color", ("steel", "black", "white")))),
        Product("Desk Lamp", "home", 36.0, (("color", ("black", "white", "silver")), ("bulb", ("warm", "cool")))),
        Product("Coffee Grinder", "kitchen", 79.0, (("type", ("blade", "burr")), ("color", ("black", "steel", "red")))),
        Product("Bed Sheet Set", "bedroom", 69.0, (("size", ("twin", "full", "queen", "king")),
                                                  ("color", ("white", "grey", "sage")))),
        Product("Ceramic Mug Set", "kitchen", 28.0, (("pieces", ("2", "4", "6")), ("glaze", ("matte", "gloss")))),
        Product("Throw Pillow", "home", 26.0, (("color", ("rust", "teal", "cream")), ("fill", ("down", "polyester")))),
        Product("Chef Knife", "kitchen", 59.0, (("length", ("6 in", "8 in", "10 in")), ("handle", ("wood", "steel")))),
        Product("Air Purifier", "home", 149.0, (("size", ("small", "large")), ("filter", ("HEPA", "carbon")))),
    ),
    "test": (
        Product("Wireless Headphones", "audio", 129.0, (("color", ("black", "silver", "blue")),
                                                       ("style", ("over-ear", "on-ear")))),
        Product("Phone Case", "phone", 24.0, (("model", ("A12", "A13", "A14")), ("color", ("clear", "black", "red")))),
        Product("Yoga Mat", "fitness", 34.0, (("thickness", ("4 mm", "6 mm", "8 mm")), ("color", ("purple", "blue", "green")))),
        Product("Water Bottle", "outdoor", 29.0, (("capacity", ("500 ml", "750 ml", "1 l")), ("color", ("steel", "black", "mint")))),
        Product("Smart Watch", "wearables", 199.0, (("size", ("41 mm", "45 mm")), ("strap", ("sport", "leather", "metal")))),
        Product("Hiking Backpack", "outdoor", 89.0, (("capacity", ("20 l", "30 l", "40 l")), ("color", ("orange", "grey")))),
        Product("Bluetooth Speaker", "audio", 59.0, (("color", ("black", "red", "blue")), ("size", ("mini", "standard")))),
        Product("Camping Lantern", "outdoor", 32.0, (("power", ("battery", "solar")), ("color", ("green", "black", "orange")))),
    ),
}

FIRST_NAMES = ("Ana", "Ben", "Chloe", "Daniel", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jamal", "Kira", "Liam",
               "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Yusuf",
               "Zoe", "Aiden", "Bea", "Carlos", "Dina", "Emil")
LAST_NAMES = ("Lopez", "Smith", "Nguyen", "Khan", "Garcia", "Muller", "Rossi", "Kim", "Okafor", "Silva", "Novak",
              "Cohen", "Patel", "Berg", "Moreau", "Tanaka", "Ivanova", "Haddad", "Walker", "Santos")
STREETS = ("Elm Street", "Oak Avenue", "Maple Drive", "Cedar Lane", "Pine Road", "Birch Court", "Lake Street",
           "Hill Road", "River Lane", "Park Avenue", "Main Street", "Willow Way", "Sunset Boulevard", "Church Street")
CITIES = (("Springfield", "IL", "627"), ("Madison", "WI", "537"), ("Austin", "TX", "787"), ("Denver", "CO", "802"),
          ("Portland", "OR", "972"), ("Columbus", "OH", "432"), ("Raleigh", "NC", "276"), ("Tucson", "AZ", "857"),
          ("Boise", "ID", "837"), ("Albany", "NY", "122"), ("Omaha", "NE", "681"), ("Richmond", "VA", "232"))
CARRIERS = ("UPS", "FedEx", "USPS")
