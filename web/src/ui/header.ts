/**
 * The top bar (language, example, compile all, new pane, share, theme) and the permalink box that
 * Share opens. Holds no state: it calls the page's actions.
 */
import type { Language } from "../catalog";
import { EXAMPLES } from "../examples";
import { applyTheme, currentTheme } from "../theme";
import { copyText, flash, h } from "./dom";

export const LANGUAGE_LABELS: Record<Language, string> = {
  pytorch: "PyTorch",
  triton: "Triton",
  raw_ir: "Raw IR",
};

export interface HeaderActions {
  setLanguage(language: Language): void;
  loadExample(index: number): void;
  compileAll(): void;
  addPane(): void;
  share(): void;
}

export class Header {
  readonly element: HTMLElement;
  readonly shareBox: HTMLElement;
  private readonly languageSelect: HTMLSelectElement;
  private readonly exampleSelect: HTMLSelectElement;
  private readonly shareUrl: HTMLInputElement;

  constructor(languages: readonly Language[], actions: HeaderActions) {
    this.languageSelect = h(
      "select",
      {
        id: "language",
        "aria-label": "Input language",
        on: { change: () => actions.setLanguage(this.languageSelect.value as Language) },
      },
      ...languages.map((l) => h("option", { value: l }, LANGUAGE_LABELS[l])),
    );
    this.exampleSelect = h("select", {
      id: "example",
      "aria-label": "Load an example",
      on: {
        change: () => {
          const index = Number(this.exampleSelect.value);
          this.exampleSelect.value = "";
          if (!Number.isNaN(index)) actions.loadExample(index);
        },
      },
    });
    const button = (id: string, label: string, onClick: () => void, extra = {}) =>
      h("button", { type: "button", id, on: { click: onClick }, ...extra }, label);
    this.element = h(
      "header",
      { class: "topbar" },
      h("h1", {}, h("span", { class: "logo" }, "mirai"), " explorer"),
      h("label", { class: "field" }, "Language ", this.languageSelect),
      this.exampleSelect,
      h("span", { class: "spacer" }),
      button("compile-all", "Compile all", () => actions.compileAll(), {
        class: "primary",
        title: "Ctrl+Enter",
      }),
      button("add-pane", "+ Pane", () => actions.addPane()),
      button("share", "Share", () => actions.share(), { title: "Save a permalink to this page" }),
      themeToggle(),
    );
    this.shareUrl = h("input", { class: "share-url", readOnly: true, "aria-label": "Permalink" });
    const copy: HTMLButtonElement = h(
      "button",
      {
        type: "button",
        class: "small",
        on: { click: () => void copyText(this.shareUrl.value).then(() => flash(copy, "Copied")) },
      },
      "Copy link",
    );
    this.shareBox = h("div", { class: "share-box", hidden: true }, "Permalink: ", this.shareUrl, copy);
  }

  /** Shows the language and offers its examples. */
  setLanguage(language: Language): void {
    this.languageSelect.value = language;
    this.exampleSelect.replaceChildren(
      h("option", { value: "", disabled: true }, "Load example…"),
      ...EXAMPLES[language].map((e, i) => h("option", { value: String(i) }, e.name)),
    );
    this.exampleSelect.value = "";
  }

  hidePermalink(): void {
    this.shareBox.hidden = true;
  }

  showPermalink(url: string): void {
    this.shareUrl.value = url;
    this.shareBox.hidden = false;
    this.shareUrl.select();
  }
}

function themeToggle(): HTMLButtonElement {
  const label = () => (currentTheme() === "dark" ? "☀ Light" : "☾ Dark");
  const toggle: HTMLButtonElement = h(
    "button",
    {
      type: "button",
      id: "theme-toggle",
      title: "Switch light/dark theme",
      on: {
        click: () => {
          applyTheme(currentTheme() === "dark" ? "light" : "dark");
          toggle.textContent = label();
        },
      },
    },
    label(),
  );
  return toggle;
}
