"""The documentation site builds with ``mkdocs build --strict`` (no broken link or anchor,
no page left out of the navigation) and opens with the network unused: nothing in it loads
from outside, checked in its files and in Chromium with every request outside ``file://``
refused, search included."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.async_api import Request, Route, async_playwright

from tests.helpers.browser import launch

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "docs" / "assets" / "vendor"
EXTERNAL_LOAD = re.compile(
    r"<(?:script|link|img|iframe|source|audio|video|embed|object)\b[^>]*?"
    r"\b(?:src|href|data)=[\"']?(?:https?:)?//",
    re.I,
)
"""An element that would load something from another host (a plain ``<a href>`` to
another site loads nothing until clicked)."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it, into a folder of this module's own."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [
            str(Path(sys.executable).with_name("mkdocs")),
            "build",
            "--strict",
            "--site-dir",
            str(out),
        ],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return out


@pytest.mark.heavy  # the site's build: mkdocs run as a new process
def test_the_site_builds_strict_with_a_page_for_every_audience(site: Path) -> None:
    for page in (
        "index.html",
        "operators/install.html",
        "integrators/mqtt.html",
        "floor/cluster.html",
        "auditors/journal.html",
        "developers/benchmarks.html",
        "reference/configuration.html",
        "search/search_index.js",  # the offline search's index, inlined in a script
    ):
        assert (site / page).is_file(), page


@pytest.mark.heavy
def test_no_page_or_stylesheet_loads_anything_from_outside(site: Path) -> None:
    pages = list(site.rglob("*.html"))
    assert len(pages) > 40
    for path in pages:
        found = EXTERNAL_LOAD.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(site)}: {found}"
    for path in site.rglob("*.css"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"@import|url\(\s*[\"']?(?:https?:)?//", text), path.name


def test_the_vendored_iframe_worker_is_the_one_its_readme_names() -> None:
    readme = (VENDOR / "README.md").read_text()
    named = re.search(r"`package/shim/index\.js` unchanged \(SHA-256 `([0-9a-f]{64})`\)", readme)
    assert named is not None
    shim = (VENDOR / "iframe-worker-shim.js").read_bytes()
    assert hashlib.sha256(shim).hexdigest() == named.group(1)
    assert (
        "MIT" in (VENDOR / "iframe-worker.LICENSE").read_text()
        or "Permission is hereby" in (VENDOR / "iframe-worker.LICENSE").read_text()
    )


@pytest.mark.heavy
@pytest.mark.service  # a browser, started here
async def test_the_site_opens_from_the_file_system_with_the_network_unused(site: Path) -> None:
    refused: list[str] = []
    errors: list[str] = []

    async def only_files(route: Route, request: Request) -> None:
        if request.url.startswith(("file://", "data:", "blob:", "about:")):
            await route.continue_()
        else:
            refused.append(request.url)
            await route.abort()

    async with async_playwright() as playwright:
        browser = await launch(playwright)
        try:
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            await context.route("**/*", only_files)
            page = await context.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            for name in ("index.html", "operators/install.html", "reference/mqtt.html"):
                await page.goto((site / name).as_uri(), wait_until="load")
                assert await page.title()
            # Search, from file://: the index inlined and the worker in an iframe (the shim).
            await page.goto((site / "index.html").as_uri(), wait_until="load")
            query = page.locator("input[data-md-component='search-query']")
            await query.click()
            await query.press_sequentially("journal verify", delay=20)
            results = page.locator(".md-search-result__item")
            await results.first.wait_for(timeout=30_000)
            assert await results.count() > 0
            await context.close()
        finally:
            await browser.close()
    assert refused == [], f"requests outside the file system: {refused}"
    assert errors == [], errors


def test_every_screenshot_is_shown_on_a_page() -> None:
    # The screen tests write docs/screens/ (LAMMER_SCREENSHOTS): each belongs on the page
    # that describes its screen (mkdocs --strict checks that every link resolves).
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    shots = sorted((ROOT / "docs" / "screens").glob("*.png"))
    assert len(shots) > 20
    for shot in shots:
        assert f"screens/{shot.name})" in pages, f"{shot.name} is shown on no page"
