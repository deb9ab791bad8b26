/**
 * One output pane: its own IR type, GPU target and pipeline; a compile with progress and cancel;
 * the output (see outputView.ts) with copy and download; errors.
 */
import { CANCEL, generateWithProgress, type Failure, type GenerateRequest } from "../api";
import {
  defaultIrType,
  findIrType,
  irTypesFor,
  resolveTarget,
  targetsFor,
  type Catalog,
  type Language,
} from "../catalog";
import { toRequestFields } from "../pipeline";
import type { PaneState } from "../state";
import { clear, copyText, download, flash, h } from "./dom";
import { renderError } from "./errorView";
import { OutputView } from "./outputView";
import { PipelineBuilder } from "./pipelineBuilder";
import { ProgressView } from "./progressView";

export interface PaneContext {
  catalog: Catalog;
  source(): { code: string; language: Language };
  /** The pane's state changed (to save it); `recompile` when the output is now stale. */
  changed(recompile: boolean): void;
  remove(pane: Pane): void;
}

const EXTENSION: Record<string, string> = {
  mlir: "mlir",
  llvm: "ll",
  ptx: "ptx",
  asm: "s",
  python: "py",
  cpp: "cc",
  text: "txt",
};

export class Pane {
  readonly element: HTMLElement;
  private readonly irSelect: HTMLSelectElement;
  private readonly targetSelect: HTMLSelectElement;
  private readonly pipeline: PipelineBuilder;
  private readonly progress: ProgressView;
  private readonly errorBox: HTMLElement;
  private readonly output: OutputView;
  private readonly statusLine: HTMLElement;
  private controller: AbortController | null = null;
  private timer: number | undefined;
  /** Finished compilations, exposed as data-done so tests and tools can wait for the next one. */
  private finished = 0;

  constructor(
    public state: PaneState,
    private readonly ctx: PaneContext,
    index: number,
  ) {
    this.irSelect = h("select", {
      class: "ir-type",
      "aria-label": "IR type",
      on: { change: () => this.setIrType(this.irSelect.value) },
    });
    this.targetSelect = h("select", {
      class: "target",
      "aria-label": "GPU target",
      title: "GPU target of the compilation",
      on: { change: () => this.setTarget(this.targetSelect.value) },
    });
    const copyButton: HTMLButtonElement = h(
      "button",
      {
        type: "button",
        class: "copy",
        title: "Copy what the pane shows",
        on: { click: () => void copyText(this.output.shownText()).then(() => flash(copyButton, "Copied")) },
      },
      "Copy",
    );
    const wrapButton: HTMLButtonElement = h(
      "button",
      {
        type: "button",
        class: "wrap",
        title: "Wrap long lines",
        "aria-pressed": "false",
        on: {
          click: () => {
            const wrap = wrapButton.getAttribute("aria-pressed") !== "true";
            wrapButton.setAttribute("aria-pressed", String(wrap));
            this.output.setWrap(wrap);
          },
        },
      },
      "Wrap",
    );
    const downloadButton = h(
      "button",
      { type: "button", class: "download", title: "Download what the pane shows", on: { click: () => this.download() } },
      "Download",
    );
    this.pipeline = new PipelineBuilder(
      { steps: state.steps, dumpAfterEach: state.dumpAfterEach },
      ctx.catalog.tools,
      ctx.catalog.missingTools,
      (model) => {
        this.state = { ...this.state, steps: model.steps, dumpAfterEach: model.dumpAfterEach };
        this.ctx.changed(true);
      },
    );
    this.progress = new ProgressView(() => this.cancel());
    this.errorBox = h("div", { class: "error-host" });
    this.output = new OutputView(findIrType(ctx.catalog, state.irType).syntax);
    this.statusLine = h("span", { class: "pane-status" });
    this.element = h(
      "section",
      { class: "pane", "aria-label": `Output pane ${index + 1}` },
      h(
        "header",
        { class: "pane-header" },
        h(
          "div",
          { class: "pane-tools" },
          this.irSelect,
          this.targetSelect,
          h("button", { type: "button", class: "compile primary", on: { click: () => void this.compile() } }, "Compile"),
          copyButton,
          downloadButton,
          wrapButton,
        ),
        this.statusLine,
        h(
          "button",
          {
            type: "button",
            class: "icon close-pane",
            title: "Close this pane",
            "aria-label": "Close this pane",
            on: { click: () => this.ctx.remove(this) },
          },
          "×",
        ),
      ),
      this.pipeline.element,
      this.progress.element,
      this.errorBox,
      this.output.nav,
      this.output.area,
    );
    this.refreshIrTypes();
    // Alt+Left / Alt+Right step through the stages of a dump.
    this.element.addEventListener("keydown", (e) => {
      if (!e.altKey || (e.key !== "ArrowLeft" && e.key !== "ArrowRight")) return;
      e.preventDefault();
      this.output.step(e.key === "ArrowLeft" ? -1 : 1);
    });
  }

  /** Refills the IR type list for the source's language, keeping the type when it fits. */
  refreshIrTypes(): void {
    const { language } = this.ctx.source();
    const types = irTypesFor(this.ctx.catalog, language);
    clear(this.irSelect);
    for (const t of types) {
      this.irSelect.appendChild(h("option", { value: t.value, title: t.description ?? "" }, t.label));
    }
    if (!types.some((t) => t.value === this.state.irType)) {
      this.state = { ...this.state, irType: defaultIrType(this.ctx.catalog, language) };
    }
    this.irSelect.value = this.state.irType;
    this.refreshTarget();
    this.output.setSyntax(findIrType(this.ctx.catalog, this.state.irType).syntax);
  }

  /** Shows the targets the server offers for the pane's IR type; a target it does not offer is
   * dropped, and another spelling of one it offers (`cuda:80`) becomes that target's name. */
  private refreshTarget(): void {
    const irType = findIrType(this.ctx.catalog, this.state.irType);
    const targets = targetsFor(this.ctx.catalog, irType);
    this.targetSelect.hidden = targets.length === 0;
    clear(this.targetSelect);
    if (targets.length === 0) return;
    const byDefault = irType.target?.default;
    this.targetSelect.appendChild(
      h("option", { value: "" }, byDefault ? `default (${byDefault})` : "default target"),
    );
    for (const t of targets) {
      this.targetSelect.appendChild(h("option", { value: t.name }, t.device ? `${t.name} (${t.device})` : t.name));
    }
    const known = resolveTarget(this.ctx.catalog, irType, this.state.target);
    if (known !== this.state.target) this.setTarget(known ?? "", false);
    this.targetSelect.value = this.state.target ?? "";
  }

  private setTarget(value: string, notify = true): void {
    const { target: _old, ...rest } = this.state;
    this.state = value === "" ? rest : { ...rest, target: value };
    if (notify) this.ctx.changed(true);
  }

  private setIrType(value: string): void {
    this.state = { ...this.state, irType: value };
    this.refreshTarget();
    this.output.setSyntax(findIrType(this.ctx.catalog, value).syntax);
    this.ctx.changed(true);
  }

  /** The request this pane sends for the current source. */
  request(): GenerateRequest {
    const { code, language } = this.ctx.source();
    const req: GenerateRequest = {
      code,
      ir_type: this.state.irType,
      selected_language: language,
      ...toRequestFields(this.state.steps),
    };
    if (this.state.dumpAfterEach) req["dump_after_each_opt"] = true;
    // `target` names the GPU target of any IR type that takes one (the server reads it for
    // triton_target and cuda_target alike).
    const irType = findIrType(this.ctx.catalog, this.state.irType);
    if (irType.target && this.state.target) req["target"] = this.state.target;
    return req;
  }

  /** Compiles after `ms` without further calls (edits in a row compile once). */
  schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = window.setTimeout(() => void this.compile(), ms);
  }

  /** Compiles now, replacing a scheduled compilation and any still running in this pane. */
  async compile(): Promise<void> {
    clearTimeout(this.timer);
    // The replaced compilation is left to finish on the server (its worker stays warm).
    this.controller?.abort("superseded");
    const controller = new AbortController();
    this.controller = controller;
    this.element.dataset["busy"] = "true";
    this.statusLine.textContent = "";
    const started = performance.now();
    // Only compilations that take a while show the progress line.
    let showProgress = false;
    const reveal = setTimeout(() => (showProgress = true), 250);
    const result = await generateWithProgress(
      this.request(),
      (p) => {
        if (showProgress) this.progress.show(p);
      },
      controller.signal,
    );
    clearTimeout(reveal);
    if (this.controller !== controller) return; // superseded by a newer compile
    this.controller = null;
    this.progress.hide();
    delete this.element.dataset["busy"];
    this.element.dataset["done"] = String(++this.finished);
    const seconds = ((performance.now() - started) / 1000).toFixed(2);
    if (result.status === "ok") {
      this.showError(null);
      this.output.setOutput(result.output);
      const lines = result.output.split("\n").length;
      this.statusLine.textContent = `${lines} lines · ${seconds} s`;
      this.element.dataset["state"] = "ok";
    } else {
      this.showError(result);
      this.element.dataset["state"] = result.message === "Cancelled" ? "cancelled" : "error";
    }
  }

  /** Stops the running compilation, on the server too. */
  cancel(): void {
    this.controller?.abort(CANCEL);
  }

  private showError(error: Failure | null): void {
    clear(this.errorBox);
    if (error) this.errorBox.appendChild(renderError(error));
  }

  private download(): void {
    const syntax = findIrType(this.ctx.catalog, this.state.irType).syntax;
    const ext = this.output.showsDiff() ? "diff" : (EXTENSION[syntax] ?? "txt");
    download(`${this.state.irType}.${ext}`, this.output.shownText());
  }

  /** Replaces the pane's settings (from a permalink). */
  setState(state: PaneState): void {
    this.state = state;
    this.pipeline.set({ steps: state.steps, dumpAfterEach: state.dumpAfterEach });
    this.refreshIrTypes();
  }

  destroy(): void {
    clearTimeout(this.timer);
    this.cancel();
    this.output.destroy();
    this.element.remove();
  }
}
