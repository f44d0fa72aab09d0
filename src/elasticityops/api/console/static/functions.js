// Functions: each spec and version, what the backend runs for it, and its recent success rate
// and p95 time to start, counted from its latest invocations (one page of the list each, never
// all rows). A name opens the function's own view (function.js): invoke it, its time series.
import { api } from "./api.js";
import { el, functionStats, runs, scroll, seconds, when } from "./format.js";

const RECENT = 200;

export function render(main, _arg, { session }) {
  const body = el("tbody");
  const error = el("p", { class: "error", role: "alert" });
  main.append(el("h1", { text: "Functions" }), error,
    scroll(el("table", { class: "list", "aria-label": "functions" },
      el("thead", {}, el("tr", {}, ["Function", "Version", "GPU", "Priority", `Runs (${session.backend} backend)`, "Updated",
        `Success (last ${RECENT})`, "p95 time to start"].map((h) => el("th", { scope: "col", text: h })))), body)));
  const gone = new AbortController();

  async function load() {
    const { items } = await api("/v1/functions", { signal: gone.signal });
    body.replaceChildren(...items.map(({ spec, version, updated_at }) => {
      const stats = el("td", { class: "stats", text: "…" });
      const p95 = el("td", { text: "…" });
      api(`/v1/invocations?function=${encodeURIComponent(spec.name)}&limit=${RECENT}`, { signal: gone.signal })
        .then(({ items: recent }) => {
          const s = functionStats(recent);
          stats.textContent = s.successRate === null ? `– (${s.count} recent)` : `${(s.successRate * 100).toFixed(1)}% of ${s.ended}`;
          p95.textContent = seconds(s.p95Start);
        }).catch(() => { stats.textContent = "?"; });
      const gpu = spec.gpu ? `${spec.gpu.count ?? 1} × ${[].concat(spec.gpu.type).join(" | ")}` : "–";
      return el("tr", { "data-function": spec.name },
        el("th", { scope: "row" }, el("a", { href: `#/functions/${encodeURIComponent(spec.name)}`, text: spec.name })),
        el("td", { text: String(version) }), el("td", { text: gpu }), el("td", { text: spec.priority ?? "–" }),
        el("td", { class: "runs" }, el("details", {}, el("summary", {}, el("code", { text: runs(spec, session.backend) })),
          el("pre", { class: "spec", text: JSON.stringify(spec, null, 2) }))),
        el("td", { text: when(updated_at) }), stats, p95);
    }));
    if (!items.length) body.append(el("tr", {}, el("td", { colspan: "8", class: "muted", text: "No functions deployed." })));
  }
  load().catch((e) => { if (e.name !== "AbortError") { error.textContent = e.message; if (e.status === 401) throw e; } });
  return () => gone.abort();
}
