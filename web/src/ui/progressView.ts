/** The progress line of a running compilation: state, elapsed time and a Cancel button. */
import type { Progress } from "../api";
import { h } from "./dom";

export class ProgressView {
  readonly element: HTMLElement;
  private readonly label: HTMLElement;

  constructor(onCancel: () => void) {
    this.label = h("span", { class: "progress-label" });
    this.element = h(
      "div",
      { class: "progress", role: "status", hidden: true },
      h("span", { class: "spinner", "aria-hidden": "true" }),
      this.label,
      h("div", { class: "progress-bar" }, h("div", { class: "progress-fill" })),
      h("button", { type: "button", class: "small cancel", on: { click: onCancel } }, "Cancel"),
    );
  }

  show(p: Progress): void {
    this.element.hidden = false;
    const seconds = (p.elapsedMs / 1000).toFixed(1);
    const detail = p.detail ? ` — ${p.detail}` : "";
    this.label.textContent = `Compiling (${p.state}${detail}) ${seconds} s`;
  }

  hide(): void {
    this.element.hidden = true;
  }
}
