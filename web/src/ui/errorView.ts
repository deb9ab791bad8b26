/**
 * An error in the guide's shape: the message in plain sight, the detail (a traceback, a tool's
 * stderr) behind a disclosure, as the integration guide recommends.
 */
import type { Failure } from "../api";
import { copyText, flash, h } from "./dom";

export function renderError(error: Failure): HTMLElement {
  const box = h(
    "div",
    { class: "error", role: "alert" },
    h("div", { class: "error-message" }, h("strong", {}, "Error: "), error.message),
  );
  if (error.detail.trim() !== "") {
    const copy = h(
      "button",
      {
        type: "button",
        class: "small",
        on: { click: () => void copyText(error.detail).then(() => flash(copy, "Copied")) },
      },
      "Copy detail",
    );
    box.appendChild(
      h(
        "details",
        { class: "error-detail" },
        h("summary", {}, "Detail"),
        h("pre", {}, error.detail),
        copy,
      ),
    );
  }
  return box;
}
