/**
 * The page: header (language, example, panes, permalink, theme), the source editor, and the output
 * panes. Holds the page state, compiles panes when it changes, saves and restores permalinks.
 */
import { fetchCatalog, fetchVersion, freeIrCache, loadPermalink, savePermalink, type Failure } from "./api";
import { defaultIrType, guideCatalog, type Catalog, type Language, type Syntax } from "./catalog";
import { createEditor, type CodeEditor } from "./editor";
import { exampleState, isExample } from "./examples";
import { guessRawSyntax } from "./irModes";
import { LANGUAGES, newPane, parseState, type PageState } from "./state";
import { applyTheme, initialTheme } from "./theme";
import { h } from "./ui/dom";
import { renderError } from "./ui/errorView";
import { Header } from "./ui/header";
import { Pane } from "./ui/pane";
import { createSplitter } from "./ui/splitter";

const AUTOSAVE_KEY = "mirai-explorer-state";
const SOURCE_DEBOUNCE_MS = 800;
const PANE_DEBOUNCE_MS = 500;

export class App {
  private language: Language = "pytorch";
  private panes: Pane[] = [];
  private source!: CodeEditor;
  private sourceSyntax: Syntax = "python";
  private readonly header: Header;
  private readonly panesHost: HTMLElement;
  private readonly banner: HTMLElement;
  /** Says that the server's IR type listing could not be read, while the page does without it. */
  private readonly catalogNotice: HTMLElement;
  private readonly footer: HTMLElement;
  private sourceTimer: number | undefined;
  private lastTritonCode: string | null = null;
  private restoring = false;
  /** The state the URL's permalink (`?p=`) holds, while the page still shows it. */
  private sharedState: string | null = null;

  constructor(
    private readonly root: HTMLElement,
    private readonly catalog: Catalog,
    catalogProblem: Failure | null = null,
  ) {
    // The languages of the server's listing that this page has examples for.
    const languages = LANGUAGES.filter((l) => catalog.languages.includes(l));
    this.header = new Header(languages.length ? languages : LANGUAGES, {
      setLanguage: (language) => this.setLanguage(language),
      loadExample: (index) => this.apply(exampleState(this.language, index)),
      compileAll: () => this.compileAll(),
      addPane: () => this.addPane(),
      share: () => void this.share(),
    });
    this.panesHost = h("div", { class: "panes" });
    this.banner = h("div", { class: "banner" });
    this.catalogNotice = h("div", { class: "banner catalog-notice" });
    if (catalogProblem) {
      this.catalogNotice.appendChild(
        renderError({
          ...catalogProblem,
          message:
            `The server's list of IR types could not be read (${catalogProblem.message}). ` +
            "The page offers the integration guide's IR types by name only: no labels, no GPU " +
            "target choice. Reload once the server answers GET /ir_types.",
        }),
      );
    }
    this.footer = h("footer", { class: "footer" });
  }

  /** Builds the page and shows the permalink in the URL, the autosaved state, or the example. */
  async start(): Promise<void> {
    const sourceHost = h("div", { class: "editor-host" });
    const source = h(
      "section",
      { class: "source", "aria-label": "Source" },
      h("div", { class: "source-header" }, "Source"),
      sourceHost,
    );
    const workspace = h("main", { class: "workspace" }, source);
    workspace.append(createSplitter(workspace), this.panesHost);
    this.root.append(
      this.header.element,
      this.header.shareBox,
      this.catalogNotice,
      this.banner,
      workspace,
      this.footer,
    );
    this.source = createEditor(sourceHost, {
      text: "",
      syntax: "python",
      readOnly: false,
      label: "Source code",
      onChange: () => this.sourceChanged(),
    });
    document.addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
        e.preventDefault();
        this.compileAll();
      }
    });
    void fetchVersion().then((v) => {
      const listing =
        this.catalog.source === "server" ? "IR types from the server" : "the guide's IR type names";
      this.footer.textContent = `${v} · ${listing} · Ctrl+Enter compiles`;
    });
    await this.restoreInitialState();
  }

  private async restoreInitialState(): Promise<void> {
    const id = new URLSearchParams(window.location.search).get("p");
    if (id) {
      const loaded = await loadPermalink(id);
      if ("state" in loaded) {
        const state = parseState(loaded.state);
        if (typeof state !== "string") {
          this.apply(state);
          this.sharedState = JSON.stringify(this.state());
          return;
        }
        this.showBanner({ status: "error", message: "This permalink holds an unusable state", detail: state });
      } else {
        this.showBanner(loaded);
      }
    }
    const saved = parseState(safeJson(localStorage.getItem(AUTOSAVE_KEY)));
    if (typeof saved !== "string") return this.apply(saved);
    this.apply(exampleState("pytorch"));
  }

  /** The whole state (what a permalink stores). */
  state(): PageState {
    return {
      version: 1,
      language: this.language,
      code: this.source.getText(),
      panes: this.panes.map((p) => p.state),
    };
  }

  /** Shows `state` and compiles every pane. */
  apply(state: PageState): void {
    this.restoring = true;
    this.language = state.language;
    this.header.setLanguage(state.language);
    this.source.setText(state.code);
    this.updateSourceSyntax();
    for (const p of this.panes) p.destroy();
    this.panes = [];
    for (const paneState of state.panes) this.addPane(paneState, false);
    this.restoring = false;
    this.autosave();
    this.compileAll();
  }

  private addPane(state = newPane(defaultIrType(this.catalog, this.language)), compile = true): void {
    const pane: Pane = new Pane(
      state,
      {
        catalog: this.catalog,
        source: () => ({ code: this.source.getText(), language: this.language }),
        changed: (recompile) => {
          this.autosave();
          if (recompile) pane.schedule(PANE_DEBOUNCE_MS);
        },
        remove: (p) => this.removePane(p),
      },
      this.panes.length,
    );
    this.panes.push(pane);
    this.panesHost.appendChild(pane.element);
    if (compile) {
      this.autosave();
      void pane.compile();
    }
  }

  private removePane(pane: Pane): void {
    if (this.panes.length === 1) return; // the page always keeps one pane
    pane.destroy();
    this.panes = this.panes.filter((p) => p !== pane);
    this.autosave();
  }

  private setLanguage(language: Language): void {
    const previous = this.language;
    this.language = language;
    // Swap in the new language's example unless the user wrote code of their own.
    const code = this.source.getText().trim();
    if (code === "" || isExample(previous, code)) {
      this.apply(exampleState(language));
      return;
    }
    this.header.setLanguage(language);
    this.updateSourceSyntax();
    for (const p of this.panes) p.refreshIrTypes();
    this.autosave();
    this.compileAll();
  }

  private sourceChanged(): void {
    if (this.restoring) return;
    this.updateSourceSyntax();
    this.autosave();
    clearTimeout(this.sourceTimer);
    this.sourceTimer = window.setTimeout(() => this.compileAll(), SOURCE_DEBOUNCE_MS);
  }

  private updateSourceSyntax(): void {
    const syntax: Syntax =
      this.language === "raw_ir" ? guessRawSyntax(this.source.getText()) : "python";
    if (syntax !== this.sourceSyntax) {
      this.sourceSyntax = syntax;
      this.source.setSyntax(syntax);
    }
  }

  compileAll(): void {
    clearTimeout(this.sourceTimer);
    this.freeStaleTritonCache();
    for (const p of this.panes) void p.compile();
  }

  /** Tells the server a Triton source is gone, so its kernel cache can go (guide §2.2). */
  private freeStaleTritonCache(): void {
    const code = this.language === "triton" ? this.source.getText() : null;
    if (this.lastTritonCode !== null && this.lastTritonCode !== code) {
      void freeIrCache(this.lastTritonCode);
    }
    this.lastTritonCode = code;
  }

  private async share(): Promise<void> {
    const state = this.state();
    const saved = await savePermalink(state);
    if ("id" in saved) {
      this.sharedState = JSON.stringify(state);
      const params = new URLSearchParams(window.location.search);
      params.set("p", saved.id);
      history.replaceState(null, "", `${window.location.pathname}?${params}`);
      this.header.showPermalink(window.location.href);
      this.showBanner(null);
    } else {
      this.showBanner(saved);
    }
  }

  private showBanner(error: Parameters<typeof renderError>[0] | null): void {
    this.banner.replaceChildren(...(error ? [renderError(error)] : []));
  }

  /** Keeps the state for a reload; an edited page no longer matches its permalink, so the URL
   * drops `?p=` (a reload then shows the edits, not the older shared state). */
  private autosave(): void {
    if (this.restoring) return;
    const state = JSON.stringify(this.state());
    localStorage.setItem(AUTOSAVE_KEY, state);
    if (this.sharedState !== null && state !== this.sharedState) {
      this.sharedState = null;
      const params = new URLSearchParams(window.location.search);
      params.delete("p");
      const query = params.toString();
      history.replaceState(null, "", window.location.pathname + (query ? `?${query}` : ""));
      this.header.hidePermalink();
    }
  }
}

function safeJson(text: string | null): unknown {
  try {
    return text === null ? null : JSON.parse(text);
  } catch {
    return null;
  }
}

/** Starts the page in `root`. */
export async function main(root: HTMLElement): Promise<App> {
  applyTheme(initialTheme());
  const listed = await fetchCatalog();
  const app =
    "irTypes" in listed ? new App(root, listed) : new App(root, guideCatalog(), listed);
  await app.start();
  (window as unknown as { miraiExplorer: App }).miraiExplorer = app;
  return app;
}
