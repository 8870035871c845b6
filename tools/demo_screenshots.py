"""Screenshots of a running `make demo` for the README (docs/screenshots/).

    make demo                      # in one shell
    .venv/bin/python tools/demo_screenshots.py [--url http://127.0.0.1:8000] [--out docs/screenshots]

Signs in as the demo's users in Debian's Chromium (Playwright, never its own browser download) and
saves what the README shows: alice's team dashboard and the cluster page. Run it a minute or more
after the demo started, so the charts have samples and the queue has had its first cycles.
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# file, user, path, viewport width
SHOTS = [
    ("dashboard.png", "alice", "/", 1360),
    ("cluster.png", "alice", "/cluster/", 1360),
]


def sign_in(page, user: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", f"{user}-demo-pass")
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def shoot(url: str, out: Path, shots=SHOTS) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        for name, user, path, width in shots:
            context = browser.new_context(viewport={"width": width, "height": 900}, base_url=url)
            page = context.new_page()
            sign_in(page, user)
            page.goto(path)
            page.wait_for_load_state("networkidle")
            if page.locator(".js-plotly-plot").count():
                page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length > 0")
            page.screenshot(path=str(out / name), full_page=True)
            saved.append(out / name)
            context.close()
        browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args()
    for path in shoot(args.url, args.out):
        print(path)


if __name__ == "__main__":
    main()
