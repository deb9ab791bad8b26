/**
 * The draggable bar between the source and the panes: sets the source column's width (a CSS
 * variable on the workspace), remembered locally. Double-click restores the default split.
 */
import { h } from "./dom";

const KEY = "mirai-explorer-source-width";
const MIN_SOURCE = 240;
const MIN_PANES = 360;

export function createSplitter(workspace: HTMLElement): HTMLElement {
  const saved = Number(localStorage.getItem(KEY));
  if (saved > 0) workspace.style.setProperty("--source-width", `${saved}px`);
  const bar = h("div", {
    class: "splitter",
    role: "separator",
    "aria-orientation": "vertical",
    "aria-label": "Resize source and outputs",
    title: "Drag to resize; double-click to reset",
  });
  bar.addEventListener("pointerdown", (down) => {
    down.preventDefault();
    bar.setPointerCapture(down.pointerId);
    const left = workspace.getBoundingClientRect().left;
    const move = (e: PointerEvent) => {
      const max = workspace.clientWidth - MIN_PANES;
      const width = Math.round(Math.max(MIN_SOURCE, Math.min(max, e.clientX - left - 10)));
      workspace.style.setProperty("--source-width", `${width}px`);
      localStorage.setItem(KEY, String(width));
    };
    const up = () => {
      bar.removeEventListener("pointermove", move);
      bar.removeEventListener("pointerup", up);
    };
    bar.addEventListener("pointermove", move);
    bar.addEventListener("pointerup", up);
  });
  bar.addEventListener("dblclick", () => {
    workspace.style.removeProperty("--source-width");
    localStorage.removeItem(KEY);
  });
  return bar;
}
