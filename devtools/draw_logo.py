"""Draw the plugin's market logo, ``logo.png`` (256×256, as AstrBot's
plugin market asks): a chat bubble holding "忆" (to remember) on a rounded
indigo-to-teal square, with three memory lines — what the plugin does, kept
from a conversation.

    python -m devtools.draw_logo            # writes logo.png at the repository's root

Drawn four times larger and scaled down (smooth edges). Needs Pillow and a
CJK font (Debian's fonts-noto-cjk); the committed logo.png is the output.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

REPO = Path(__file__).resolve().parent.parent
SIZE = 256
SCALE = 4
FONTS = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Bold.ttc", "/usr/share/fonts/noto-cjk/NotoSansCJK-Bold.ttc")
TOP, BOTTOM = (79, 70, 229), (13, 148, 136)  # indigo → teal
INK = (67, 56, 202)


def _font(px: int) -> ImageFont.FreeTypeFont:
    for path in FONTS:
        if Path(path).exists():
            return ImageFont.truetype(path, px, index=2)  # the .ttc's Simplified Chinese face
    raise SystemExit("draw_logo: no Noto Sans CJK Bold font (apt-get install fonts-noto-cjk)")


def draw() -> Image.Image:
    big = SIZE * SCALE
    gradient = Image.new("RGB", (big, big))
    pixels = gradient.load()
    assert pixels is not None
    for y in range(big):
        for x in range(big):
            t = (x + y) / (2 * (big - 1))  # along the diagonal
            pixels[x, y] = tuple(round(a + (b - a) * t) for a, b in zip(TOP, BOTTOM, strict=True))
    mask = Image.new("L", (big, big), 0)
    ImageDraw.Draw(mask).rounded_rectangle((0, 0, big - 1, big - 1), radius=56 * SCALE, fill=255)
    logo = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    logo.paste(gradient, (0, 0), mask)

    pen = ImageDraw.Draw(logo)
    s = SCALE
    # The bubble, its tail at the lower left.
    pen.rounded_rectangle((40 * s, 44 * s, 216 * s, 178 * s), radius=36 * s, fill="white")
    pen.polygon([(70 * s, 170 * s), (58 * s, 214 * s), (110 * s, 172 * s)], fill="white")
    # "忆", left in the bubble.
    glyph = _font(96 * s)
    pen.text((92 * s, 111 * s), "忆", font=glyph, fill=INK, anchor="mm")
    # Three remembered lines, right of it.
    for n, width in enumerate((58, 46, 34)):
        y = (88 + n * 22) * s
        pen.rounded_rectangle((150 * s, y, (150 + width) * s, y + 10 * s), radius=5 * s, fill=TOP if n else INK)
    return logo.resize((SIZE, SIZE), Image.Resampling.LANCZOS)


def main(argv: list[str] | None = None) -> int:
    target = Path((argv or sys.argv[1:] or [str(REPO / "logo.png")])[0])
    draw().save(target, optimize=True)
    print(f"wrote {target} ({target.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
