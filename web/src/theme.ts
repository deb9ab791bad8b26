/** Light and dark themes: an attribute on <html> that the stylesheet keys on, remembered locally. */

export type Theme = "light" | "dark";
const KEY = "mirai-explorer-theme";

export function initialTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  if (saved === "light" || saved === "dark") return saved;
  return window.matchMedia?.("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function applyTheme(theme: Theme): void {
  document.documentElement.dataset["theme"] = theme;
  localStorage.setItem(KEY, theme);
}

export function currentTheme(): Theme {
  return document.documentElement.dataset["theme"] === "dark" ? "dark" : "light";
}
