"""The explorer page in a real browser (Debian's chromium) against a live `mirai serve`: load, compile
the PyTorch example to torch_mlir, a two-step pipeline with stages and diffs, errors with detail, a
cancelled long compile, permalinks, themes and a narrow window. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from pagehelpers import (
    done_count,
    open_pipeline,
    output_text,
    page_state,
    pane,
    set_source,
    source_text,
    wait_for_result,
)

RAW_MLIR = """func.func @axpy(%a: f32, %x: f32, %y: f32) -> f32 {
  %zero = arith.constant 0.0 : f32
  %ax = arith.mulf %a, %x : f32
  %unused = arith.addf %zero, %zero : f32
  %r = arith.addf %ax, %y : f32
  return %r : f32
}
"""


def test_page_loads_with_the_pytorch_example(page):
    assert page.title() == "mirai explorer"
    assert page.locator("#language").input_value() == "pytorch"
    assert "example_input" in source_text(page)
    # The IR type list comes from the server's listing.
    options = (
        pane(page).locator("select.ir-type option").evaluate_all("opts => opts.map(o => o.value)")
    )
    assert {"torch_mlir", "tosa_mlir", "linalg_on_tensors_mlir", "llvm_ir", "raw_ir"} <= set(
        options
    )
    assert not any(o.startswith("triton") for o in options)
    page.locator("#language").select_option("triton")
    assert "@triton.jit" in source_text(page)
    triton_options = (
        pane(page).locator("select.ir-type option").evaluate_all("opts => opts.map(o => o.value)")
    )
    assert {"triton_ir", "triton_gpu_ir", "triton_nvptx"} <= set(triton_options)
    page.locator("#language").select_option("pytorch")
    assert "example_input" in source_text(page)
    assert wait_for_result(page) == "ok"
    assert page.js_errors == []


def test_generate_torch_mlir_for_the_example(page):
    assert pane(page).locator("select.ir-type").input_value() == "torch_mlir"
    assert wait_for_result(page) == "ok"
    text = output_text(page)
    assert "torch.aten" in text
    assert "func.func" in text
    assert pane(page).locator(".error").count() == 0
    # Download and copy give the whole output.
    with page.expect_download() as info:
        pane(page).locator("button.download").click()
    download = info.value
    assert download.suggested_filename == "torch_mlir.mlir"
    saved = Path(download.path()).read_text()
    assert "torch.aten" in saved
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    pane(page).locator("button.copy").click()
    assert page.evaluate("() => navigator.clipboard.readText()") == saved


def test_two_step_pipeline_with_dump_after_each_stages_and_diff(page):
    page.locator("#language").select_option("raw_ir")
    set_source(page, RAW_MLIR)
    p = pane(page)
    # Start from an empty pipeline, then build two mlir-opt steps with the builder.
    while p.locator(".remove-step").count():
        p.locator(".remove-step").first.click()
    open_pipeline(p)
    for flags in ("--canonicalize", "--convert-arith-to-llvm"):
        p.locator("select.add-tool").select_option("mlir_opt")
        p.locator("button.add-step").click()
        p.locator("input.flags").last.fill(flags)
    if not p.locator("input.dump-each").is_checked():
        p.locator("input.dump-each").check()
    sent = json.loads(p.locator(".request-preview").inner_text())
    assert sent == {
        "mlir_opt": "--canonicalize && --convert-arith-to-llvm",
        "dump_after_each_opt": True,
    }
    # Reordering stays within the tool and changes the chain sent.
    p.locator(".step").nth(1).get_by_role("button", name="Move up (within this tool)").click()
    assert json.loads(p.locator(".request-preview").inner_text())["mlir_opt"] == (
        "--convert-arith-to-llvm && --canonicalize"
    )
    p.locator(".step").nth(1).get_by_role("button", name="Move up (within this tool)").click()

    before = done_count(page)
    with page.expect_request(lambda r: r.url.endswith("/jobs") and r.method == "POST") as sent:
        p.locator("button.compile").click()
    assert sent.value.post_data_json == {
        "code": RAW_MLIR,
        "ir_type": "raw_ir",
        "selected_language": "raw_ir",
        "mlir_opt": "--canonicalize && --convert-arith-to-llvm",
        "dump_after_each_opt": True,
    }
    assert wait_for_result(page, after=before) == "ok"

    stages = p.locator("select.stage-select option").all_inner_texts()
    assert stages == [
        "1. Initial IR",
        "2. mlir-opt --canonicalize",
        "3. mlir-opt --convert-arith-to-llvm",
    ]
    # The last stage shows first; step back to the start and forward again.
    assert "llvm." in output_text(page)
    p.locator("button.stage-prev").click()
    p.locator("button.stage-prev").click()
    assert p.locator("select.stage-select").input_value() == "0"
    assert "%unused" in output_text(page)
    assert p.locator("button.view-diff").is_disabled()
    p.locator("button.stage-next").click()
    assert "%unused" not in output_text(page)
    # Diff of canonicalize against the initial IR (@codemirror/merge, unified): the dead addf is gone.
    p.locator("button.view-diff").click()
    diff = p.locator(".diff-view")
    assert diff.is_visible() and diff.get_attribute("data-layout") == "unified"
    removed = diff.locator(".cm-deletedChunk").all_inner_texts()
    assert any("%unused" in chunk for chunk in removed)
    assert diff.locator(".diff-removed").inner_text() != "−0"
    # Copy and download give the diff as a unified diff.
    with page.expect_download() as info:
        p.locator("button.download").click()
    assert info.value.suggested_filename == "raw_ir.diff"
    unified = Path(info.value.path()).read_text()
    assert unified.startswith("--- Initial IR\n+++ mlir-opt --canonicalize\n@@ -")
    assert any(line.startswith("-") and "%unused" in line for line in unified.splitlines())
    # The next step's diff: inserted lines, the changed words marked inside them.
    p.locator("button.stage-next").click()
    assert diff.locator(".cm-changedLine").count() > 0
    assert "llvm." in diff.inner_text()
    marks = diff.locator(".cm-merge-b .cm-changedText").all_inner_texts()
    assert any("llvm" in m for m in marks)
    # Side by side: the stage before on the left, this stage on the right.
    p.locator("button.view-split").click()
    assert diff.get_attribute("data-layout") == "split"
    assert diff.locator(".cm-mergeView .cm-editor").count() == 2
    assert "arith." in diff.locator(".cm-merge-a").inner_text()
    assert "llvm." in diff.locator(".cm-merge-b").inner_text()
    assert p.locator("button.view-split").get_attribute("aria-pressed") == "true"
    # Alt+Left steps back from the keyboard.
    p.locator("button.view-ir").focus()
    page.keyboard.press("Alt+ArrowLeft")
    assert p.locator("select.stage-select").input_value() == "1"


def test_triton_pipeline_with_triton_opt_steps(page):
    page.locator("#language").select_option("triton")
    p = pane(page)
    p.locator("select.ir-type").select_option("triton_gpu_ir")
    # The target choice is the server's list (GET /ir_types targets), with its default.
    assert p.locator("select.target").is_visible()
    options = p.locator("select.target option")
    assert options.evaluate_all("os => os.map(o => o.value)") == [
        "",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
        "gfx942",
    ]
    assert options.all_inner_texts()[:2] == ["default (sm_90)", "sm_80 (NVIDIA A100-SXM4-80GB)"]
    p.locator("select.target").select_option("sm_80")
    open_pipeline(p)
    for flags in ("--tritongpu-coalesce", "--canonicalize"):
        p.locator("select.add-tool").select_option("triton_opt")
        p.locator("button.add-step").click()
        p.locator("input.flags").last.fill(flags)
    p.locator("input.dump-each").check()
    before = done_count(page)
    with page.expect_request(lambda r: r.url.endswith("/jobs") and r.method == "POST") as sent:
        p.locator("button.compile").click()
    body = sent.value.post_data_json
    assert body["target"] == "sm_80"
    assert "triton_target" not in body and "cuda_target" not in body
    assert body["triton_opt"] == "--tritongpu-coalesce && --canonicalize"
    assert wait_for_result(page, after=before) == "ok"
    assert p.locator("select.stage-select option").all_inner_texts() == [
        "1. Initial IR",
        "2. triton-opt --tritongpu-coalesce",
        "3. triton-opt --canonicalize",
    ]
    assert "ttg." in output_text(page)
    assert 'ttg.target = "cuda:80"' in output_text(page)
    p.locator("button.view-diff").click()
    assert p.locator(".diff-view").is_visible()
    # PTX takes CUDA targets only.
    p.locator("select.ir-type").select_option("triton_nvptx")
    values = p.locator("select.target option").evaluate_all("os => os.map(o => o.value)")
    assert "gfx942" not in values and p.locator("select.target").input_value() == "sm_80"
    # Other IR types have no target choice, or a CUDA one of their own.
    page.locator("#language").select_option("pytorch")
    assert not p.locator("select.target").is_visible()
    p.locator("select.ir-type").select_option("mirai_tf_op")
    assert p.locator("select.target option").evaluate_all("os => os.map(o => o.value)") == [
        "",
        "sm_80",
        "sm_86",
        "sm_89",
        "sm_90",
    ]


def test_a_saved_target_in_an_older_spelling_is_read(new_page):
    page = new_page()
    state = {
        "version": 1,
        "language": "triton",
        "code": "print('no kernel')\n",
        "panes": [
            {"irType": "triton_nvptx", "steps": [], "dumpAfterEach": False, "target": "cuda:80"}
        ],
    }
    page.evaluate("s => localStorage.setItem('mirai-explorer-state', JSON.stringify(s))", state)
    page.reload()
    page.wait_for_selector(".pane")
    assert pane(page).locator("select.target").input_value() == "sm_80"
    assert page_state(page)["panes"][0]["target"] == "sm_80"


def test_page_without_the_ir_type_listing(new_page):
    # A backend of the guide need not serve GET /ir_types: the page says so and offers the guide's
    # IR types by name, without target choices.
    page = new_page(
        before=lambda p: p.route(
            "**/ir_types", lambda route: route.fulfill(status=404, json={"detail": "Not Found"})
        )
    )
    notice = page.locator(".catalog-notice .error-message")
    assert "list of IR types could not be read" in notice.inner_text()
    assert "HTTP 404" in notice.inner_text()
    options = (
        pane(page).locator("select.ir-type option").evaluate_all("opts => opts.map(o => o.value)")
    )
    assert options[0] == "torch_mlir" and "raw_ir" in options
    assert "inductor_output_code" not in options
    assert not pane(page).locator("select.target").is_visible()
    assert wait_for_result(page) == "ok"
    assert "torch.aten" in output_text(page)


def test_error_message_with_detail_behind_a_disclosure(page):
    assert wait_for_result(page) == "ok"
    before = done_count(page)
    set_source(page, "import torch\n\nraise ValueError('boom from the browser test')\n")
    assert wait_for_result(page, after=before) == "error"
    error = pane(page).locator(".error")
    assert "ValueError" in error.locator(".error-message").inner_text()
    detail = error.locator(".error-detail pre")
    assert not detail.is_visible()
    error.locator(".error-detail summary").click()
    assert detail.is_visible()
    assert "boom from the browser test" in detail.inner_text()


def test_long_compile_shows_progress_and_cancels(page, server_url):
    assert wait_for_result(page) == "ok"
    before = done_count(page)
    with page.expect_response(lambda r: r.url.endswith("/jobs")) as submitted:
        set_source(page, "import time\n\ntime.sleep(60)\n")
    job_id = submitted.value.json()["job_id"]
    progress = pane(page).locator(".progress")
    progress.wait_for(state="visible", timeout=15_000)
    assert "Compiling" in progress.inner_text()
    progress.locator("button.cancel").click()
    assert wait_for_result(page, after=before, timeout=15_000) == "cancelled"
    assert not progress.is_visible()
    # The job is cancelled on the server too, not only abandoned by the page.
    status = page.wait_for_function(
        """async ([url, id]) => {
            const r = await fetch(`${url}/status/${id}`).then((r) => r.json());
            return r.state === "cancelled" ? r : null;
        }""",
        arg=[server_url, job_id],
        timeout=10_000,
    )
    assert status.json_value()["state"] == "cancelled"


def test_permalink_restores_the_whole_state_in_a_new_page(new_page):
    page = new_page()
    page.locator("#language").select_option("raw_ir")
    set_source(page, RAW_MLIR)
    page.locator("#add-pane").click()
    second = pane(page, 1)
    open_pipeline(second)
    second.locator("select.add-tool").select_option("mlir_opt")
    second.locator("button.add-step").click()
    second.locator("input.flags").last.fill("--cse")
    second.locator("select.add-tool").select_option("mlir_translate")
    second.locator("button.add-step").click()
    second.locator("input.flags").last.fill("--mlir-to-llvmir")
    expected = page_state(page)
    assert len(expected["panes"]) == 2

    page.locator("#share").click()
    link = page.locator(".share-url")
    link.wait_for(state="visible")
    url = link.input_value()
    assert "?p=" in url and page.url == url

    parts = urlsplit(url)
    restored = new_page(f"{parts.path}?{parts.query}")
    restored.wait_for_function("() => document.querySelectorAll('.pane').length === 2")
    assert page_state(restored) == expected
    assert restored.locator("#language").input_value() == "raw_ir"
    assert pane(restored, 1).locator("input.flags").evaluate_all("xs => xs.map(x => x.value)") == [
        "--cse",
        "--mlir-to-llvmir",
    ]
    assert wait_for_result(restored, 1) in ("ok", "error")
    # Once edited, the page no longer claims to be the permalink; a reload keeps the edits.
    restored.locator("#add-pane").click()
    assert "?p=" not in restored.url
    restored.reload()
    restored.wait_for_function("() => document.querySelectorAll('.pane').length === 3")


def test_unknown_permalink_shows_an_error(new_page):
    page = new_page("/?p=AAAAAAAAAA")
    assert "permalink not found" in page.locator(".banner .error").inner_text()
    # The page still works: it falls back to the example.
    assert "example_input" in source_text(page)


def test_dark_theme(page):
    assert wait_for_result(page) == "ok"
    page.locator("#theme-toggle").click()
    theme = page.evaluate("() => document.documentElement.dataset.theme")
    assert theme in ("dark", "light")
    if theme != "dark":
        page.locator("#theme-toggle").click()
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(21, 24, 30)"
    page.reload()
    page.wait_for_selector(".pane")
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    assert "Light" in page.locator("#theme-toggle").inner_text()
    assert wait_for_result(page) == "ok"


def test_narrow_window(new_page):
    page = new_page(width=420, height=860)
    assert wait_for_result(page) == "ok"
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0
    assert pane(page).locator("button.compile").is_visible()
    source_box = page.locator(".source").bounding_box()
    pane_box = pane(page).bounding_box()
    assert pane_box["y"] >= source_box["y"] + source_box["height"] - 1


def test_splitter_resizes_and_outputs_wrap(page):
    assert wait_for_result(page) == "ok"
    source = page.locator(".source")
    width = source.bounding_box()["width"]
    bar = page.locator(".splitter").bounding_box()
    page.mouse.move(bar["x"] + bar["width"] / 2, bar["y"] + 200)
    page.mouse.down()
    page.mouse.move(bar["x"] + 200, bar["y"] + 200, steps=5)
    page.mouse.up()
    assert source.bounding_box()["width"] > width + 150
    lines = pane(page).locator(".output-host .cm-line")
    tall = lines.nth(2).bounding_box()["height"]
    pane(page).locator("button.wrap").click()
    assert pane(page).locator("button.wrap").get_attribute("aria-pressed") == "true"
    assert lines.nth(2).bounding_box()["height"] > tall * 1.5


def test_every_example_compiles_in_every_pane(page):
    for language in ("pytorch", "triton", "raw_ir"):
        page.locator("#language").select_option(language)
        names = page.locator("#example option:not([disabled])").all_inner_texts()
        assert len(names) >= 2, language
        for index, name in enumerate(names):
            page.locator("#example").select_option(str(index))
            count = page.locator(".pane").count()
            for i in range(count):
                state = wait_for_result(page, i)
                assert state == "ok", (
                    f"{language} / {name} / pane {i + 1}: "
                    + (pane(page, i).locator(".error-message").all_inner_texts() or [""])[0]
                )
    # The last example (LLVM IR through opt and llc) ends on PTX.
    assert ".target sm_90" in output_text(page)
