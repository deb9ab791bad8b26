"""Every IR type of the server's listing, chosen in a pane of the page for the example of its family,
gives highlighted output (the page works with every IR type the server offers)."""

from __future__ import annotations

import json
import urllib.request

from pagehelpers import done_count, output_text, pane, wait_for_result


def _listing(server_url: str) -> list[dict]:
    with urllib.request.urlopen(server_url + "/ir_types") as r:
        return json.load(r)["ir_types"]


def test_every_ir_type_of_the_listing(page, server_url):
    results = {}
    for language in ("pytorch", "triton"):
        page.locator("#language").select_option(language)
        names = [t["name"] for t in _listing(server_url) if t["family"] == language]
        assert names, f"the server lists no {language} IR type"
        select = pane(page).locator("select.ir-type")
        for name in names:
            before = done_count(page)
            if select.input_value() == name:
                pane(page).locator("button.compile").click()
            else:
                select.select_option(name)
            state = wait_for_result(page, after=before)
            message = ""
            if state != "ok":
                message = pane(page).locator(".error-message").inner_text()
            elif not output_text(page).strip():
                state, message = "empty", "no output"
            results[name] = (state, message)
    failed = {k: v for k, v in results.items() if v[0] != "ok"}
    assert not failed, f"IR types without output in the page: {failed}"
