"""Helpers of the browser tests: typing into the source editor and waiting for a pane's result."""

from __future__ import annotations

COMPILE_TIMEOUT_MS = 120_000


def pane(page, index: int = 0):
    return page.locator(".pane").nth(index)


def done_count(page, index: int = 0) -> int:
    return int(pane(page, index).get_attribute("data-done") or 0)


def wait_for_result(page, index: int = 0, after: int = 0, timeout: int = COMPILE_TIMEOUT_MS) -> str:
    """Waits until pane `index` has finished more than `after` compilations; returns its state."""
    page.wait_for_function(
        """([i, after]) => {
            const pane = document.querySelectorAll('.pane')[i];
            return pane && !pane.dataset.busy && Number(pane.dataset.done || 0) > after;
        }""",
        arg=[index, after],
        timeout=timeout,
    )
    return pane(page, index).get_attribute("data-state")


def set_source(page, code: str) -> None:
    """Replaces the source editor's text as a user pasting would."""
    editor = page.locator(".source .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(code)


def source_text(page) -> str:
    return page.evaluate("() => window.miraiExplorer.state().code")


def output_text(page, index: int = 0) -> str:
    return pane(page, index).locator(".output-host .cm-content").inner_text()


def page_state(page) -> dict:
    return page.evaluate("() => window.miraiExplorer.state()")


def open_pipeline(pane_locator) -> None:
    """Opens a pane's pipeline builder (a disclosure) unless it is open."""
    if not pane_locator.locator("details.pipeline").evaluate("d => d.open"):
        pane_locator.locator(".pipeline-summary").click()
