/**
 * The pipeline builder of a pane: steps listed in the order the server runs them, each with its
 * tool, editable flags, moves within its tool, removal; a row to add a step for any tool; the
 * "dump after each step" switch; and the exact request fields (`&&` chains) the pane sends.
 */
import {
  TOOL_INFO,
  addStep,
  canMove,
  moveStep,
  normalize,
  removeStep,
  setFlags,
  toRequestFields,
  type Step,
  type ToolField,
} from "../pipeline";
import { clear, h } from "./dom";

export interface PipelineModel {
  steps: Step[];
  dumpAfterEach: boolean;
}

export class PipelineBuilder {
  readonly element: HTMLDetailsElement;
  private readonly list: HTMLOListElement;
  private readonly preview: HTMLElement;
  private readonly summary: HTMLElement;
  private readonly dumpBox: HTMLInputElement;
  private readonly toolSelect: HTMLSelectElement;

  constructor(
    private model: PipelineModel,
    tools: readonly ToolField[],
    missingTools: readonly ToolField[],
    private readonly onChange: (model: PipelineModel, structural: boolean) => void,
  ) {
    this.summary = h("summary", { class: "pipeline-summary" });
    this.list = h("ol", { class: "steps", "aria-label": "Pipeline steps" });
    this.preview = h("pre", { class: "request-preview", "aria-label": "Request fields" });
    this.dumpBox = h("input", {
      type: "checkbox",
      class: "dump-each",
      checked: model.dumpAfterEach,
      on: {
        change: () => this.update({ ...this.model, dumpAfterEach: this.dumpBox.checked }, true),
      },
    });
    this.toolSelect = h(
      "select",
      { class: "add-tool", "aria-label": "Tool of the new step" },
      ...tools.map((tool) =>
        h(
          "option",
          { value: tool },
          TOOL_INFO[tool].alias + (missingTools.includes(tool) ? " (not on this server)" : ""),
        ),
      ),
    );
    // mlir-opt is the tool most pipelines start with.
    if (tools.includes("mlir_opt")) this.toolSelect.value = "mlir_opt";
    const addButton = h(
      "button",
      { class: "add-step", type: "button", on: { click: () => this.add() } },
      "+ Add step",
    );
    this.element = h(
      "details",
      { class: "pipeline", open: model.steps.length > 0 },
      this.summary,
      this.list,
      h(
        "div",
        { class: "pipeline-controls" },
        this.toolSelect,
        addButton,
        h("label", { class: "check" }, this.dumpBox, "Dump after each step"),
      ),
      h("div", { class: "preview-label" }, "Sent to the server:"),
      this.preview,
    );
    this.render();
  }

  /** Replaces the model (e.g. from a permalink) without notifying. */
  set(model: PipelineModel): void {
    this.model = model;
    this.dumpBox.checked = model.dumpAfterEach;
    this.render();
  }

  private add(): void {
    const tool = this.toolSelect.value as ToolField;
    const steps = addStep(this.model.steps, { tool, flags: TOOL_INFO[tool].example });
    this.element.open = true;
    this.update({ ...this.model, steps }, true);
    // Focus the new step's flags so the user can type at once.
    let index = -1;
    normalize(steps).forEach((s, i) => {
      if (s.tool === tool) index = i;
    });
    this.list.querySelectorAll<HTMLInputElement>("input.flags")[index]?.focus();
  }

  private update(model: PipelineModel, structural: boolean): void {
    this.model = model;
    if (structural) this.render();
    else this.renderSummary();
    this.onChange(model, structural);
  }

  private render(): void {
    clear(this.list);
    const steps = normalize(this.model.steps);
    steps.forEach((step, i) => this.list.appendChild(this.renderStep(steps, step, i)));
    this.renderSummary();
  }

  private renderSummary(): void {
    const n = this.model.steps.length;
    this.summary.textContent =
      n === 0 ? "Pipeline: none" : `Pipeline: ${n} step${n === 1 ? "" : "s"}`;
    if (this.model.dumpAfterEach && n > 0) this.summary.textContent += ", dump after each";
    const fields: Record<string, unknown> = { ...toRequestFields(this.model.steps) };
    if (this.model.dumpAfterEach) fields["dump_after_each_opt"] = true;
    this.preview.textContent =
      Object.keys(fields).length === 0 ? "(no pipeline fields)" : JSON.stringify(fields, null, 1).replace(/\n\s*/g, " ");
  }

  /** Handlers read `this.model` when they fire: flags edits do not re-render the rows. */
  private renderStep(steps: Step[], step: Step, i: number): HTMLLIElement {
    const info = TOOL_INFO[step.tool];
    const flags = h("input", {
      class: "flags",
      type: "text",
      value: step.flags,
      placeholder: info.example,
      spellcheck: false,
      "aria-label": `Flags of step ${i + 1} (${info.alias})`,
      on: {
        input: () => this.update({ ...this.model, steps: setFlags(this.model.steps, i, flags.value) }, false),
      },
    });
    const move = (delta: -1 | 1, label: string, title: string) =>
      h(
        "button",
        {
          type: "button",
          class: "icon",
          title,
          "aria-label": title,
          disabled: !canMove(steps, i, delta),
          on: {
            click: () => this.update({ ...this.model, steps: moveStep(this.model.steps, i, delta) }, true),
          },
        },
        label,
      );
    return h(
      "li",
      { class: "step", dataset: { tool: step.tool } },
      h("span", { class: "tool-badge", title: info.hint }, info.alias),
      flags,
      move(-1, "↑", "Move up (within this tool)"),
      move(1, "↓", "Move down (within this tool)"),
      h(
        "button",
        {
          type: "button",
          class: "icon remove-step",
          title: "Remove step",
          "aria-label": "Remove step",
          on: { click: () => this.update({ ...this.model, steps: removeStep(this.model.steps, i) }, true) },
        },
        "×",
      ),
    );
  }
}
