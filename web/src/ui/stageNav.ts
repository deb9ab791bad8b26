/**
 * Navigation through the stages of a "dump after each step" output: previous/next, a stage list,
 * and a switch between the stage's IR and its diff with the stage before (unified or side by side).
 */
import type { Stage } from "../stages";
import { clear, h } from "./dom";

/** The stage's IR, its unified diff with the stage before, or both side by side. */
export type StageMode = "ir" | "diff" | "split";

export class StageNav {
  readonly element: HTMLElement;
  private stages: Stage[] = [];
  private index = 0;
  private mode: StageMode = "ir";
  private readonly select: HTMLSelectElement;
  private readonly prev: HTMLButtonElement;
  private readonly next: HTMLButtonElement;
  private readonly irButton: HTMLButtonElement;
  private readonly diffButton: HTMLButtonElement;
  private readonly splitButton: HTMLButtonElement;
  private readonly counter: HTMLElement;

  constructor(private readonly onShow: (stages: Stage[], index: number, mode: StageMode) => void) {
    this.select = h("select", {
      class: "stage-select",
      "aria-label": "Stage",
      on: { change: () => this.go(Number(this.select.value)) },
    });
    this.prev = h(
      "button",
      { type: "button", class: "stage-prev", title: "Previous stage", on: { click: () => this.go(this.index - 1) } },
      "◀ Prev",
    );
    this.next = h(
      "button",
      { type: "button", class: "stage-next", title: "Next stage", on: { click: () => this.go(this.index + 1) } },
      "Next ▶",
    );
    this.counter = h("span", { class: "stage-counter" });
    this.irButton = h(
      "button",
      { type: "button", class: "view-ir", "aria-pressed": "true", on: { click: () => this.setMode("ir") } },
      "IR",
    );
    this.diffButton = h(
      "button",
      { type: "button", class: "view-diff", "aria-pressed": "false", on: { click: () => this.setMode("diff") } },
      "Diff with previous",
    );
    this.splitButton = h(
      "button",
      {
        type: "button",
        class: "view-split",
        "aria-pressed": "false",
        title: "The stage before and this stage side by side",
        on: { click: () => this.setMode("split") },
      },
      "Side by side",
    );
    this.element = h(
      "div",
      { class: "stage-nav", hidden: true },
      this.prev,
      this.select,
      this.next,
      this.counter,
      h("span", { class: "segmented" }, this.irButton, this.diffButton, this.splitButton),
    );
  }

  /** Shows new stages; keeps the position when the new output has as many stages. */
  setStages(stages: Stage[]): void {
    const keep = stages.length === this.stages.length;
    this.stages = stages;
    if (!keep) {
      this.index = stages.length > 1 ? stages.length - 1 : 0;
      this.mode = "ir";
    }
    this.element.hidden = stages.length < 2;
    clear(this.select);
    stages.forEach((s, i) =>
      this.select.appendChild(h("option", { value: String(i) }, `${i + 1}. ${s.title}`)),
    );
    this.refresh();
  }

  current(): { stage: Stage | undefined; previous: Stage | undefined; mode: StageMode } {
    return {
      stage: this.stages[this.index],
      previous: this.index > 0 ? this.stages[this.index - 1] : undefined,
      mode: this.mode,
    };
  }

  step(delta: -1 | 1): void {
    this.go(this.index + delta);
  }

  private go(index: number): void {
    if (index < 0 || index >= this.stages.length) return;
    this.index = index;
    if (index === 0) this.mode = "ir";
    this.refresh();
  }

  private setMode(mode: StageMode): void {
    if (mode !== "ir" && this.index === 0) return;
    this.mode = mode;
    this.refresh();
  }

  private refresh(): void {
    this.select.value = String(this.index);
    this.prev.disabled = this.index === 0;
    this.next.disabled = this.index >= this.stages.length - 1;
    this.diffButton.disabled = this.index === 0;
    this.splitButton.disabled = this.index === 0;
    this.irButton.setAttribute("aria-pressed", String(this.mode === "ir"));
    this.diffButton.setAttribute("aria-pressed", String(this.mode === "diff"));
    this.splitButton.setAttribute("aria-pressed", String(this.mode === "split"));
    this.counter.textContent = `stage ${this.index + 1} of ${this.stages.length}`;
    this.onShow(this.stages, this.index, this.mode);
  }
}
