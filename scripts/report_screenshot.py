"""The docs' picture of a report: the first screen of a ``report.html``, rendered in headless Chromium, as a PNG.

    python scripts/report_screenshot.py data/08_reporting/latest/report.html docs/img/report.png

docs/img/report.png (on docs/index.md) was made so from the report of a ``kedro run --env test`` (the tiny
configuration of the pipeline tests: its numbers are not the default run's). The browser is the system Chromium
(Debian: ``apt-get install chromium``; ``--chromium`` names another) driven by Playwright (the ``dev`` extra). The
picture is 1280 × 800 CSS pixels, saved as a palette PNG (Pillow) to keep it small in the repository.
"""

from __future__ import annotations

import argparse
import io
import shutil
from pathlib import Path

WIDTH, HEIGHT = 1280, 800
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("no Chromium found (Debian: apt-get install -y chromium); name one with --chromium")


def first_screen_png(report: Path, chromium: str, width: int = WIDTH, height: int = HEIGHT) -> bytes:
    """The report's first screen (``width`` × ``height``) as PNG bytes, once its scripts and figures have loaded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(report.resolve().as_uri(), wait_until="load")
            page.wait_for_timeout(500)  # the interactive figures draw after load
            return page.screenshot(full_page=False)
        finally:
            browser.close()


def small_png(png: bytes, colours: int = 128) -> bytes:
    """``png`` reduced to a ``colours``-colour palette (a report's first screen is mostly text: it stays legible)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a report.html (e.g. data/08_reporting/latest/report.html)")
    parser.add_argument("output", type=Path, nargs="?", default=Path("docs/img/report.png"), help="the PNG to write")
    parser.add_argument("--chromium", help="the Chromium executable (default: the first on PATH)")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        raise SystemExit(f"{args.report}: no such report")
    png = small_png(first_screen_png(args.report, args.chromium or find_chromium()))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(png)
    print(f"{args.output}: {len(png):,} bytes")


if __name__ == "__main__":
    main()
