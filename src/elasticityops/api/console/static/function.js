// One function: its spec, what the backend runs, an Invoke form (a JSON body, its example
// input to start from, sent as the console sends every change: the session cookie and the
// CSRF header), and its time series:
// invocations, failures and p95 time to start per bucket, counted from its latest invocations
// (GET /v1/invocations?function=, a few pages at most; the page says what they cover).
import { api, events } from "./api.js";
import { bars, widthOf } from "./chart.js";
import { el, runs, seconds, series, when } from "./format.js";

const RANGES = [["1h", "last hour", 3600e3, 300e3], ["6h", "last 6 hours", 6 * 3600e3, 1800e3],
  ["24h", "last 24 hours", 24 * 3600e3, 3600e3]];
const PAGE = 500;  // the API's largest page
const PAGES = 4;  // at most 2,000 invocations read for the chart
const REFRESH_MS = 10_000;

export function render(main, arg, { session }) {
  const [name, rangeArg] = arg.split("?range=");
  const [range, rangeText, span, step] = RANGES.find(([v]) => v === rangeArg) || RANGES[0];
  const error = el("p", { class: "error", role: "alert" });
  const facts = el("dl", { class: "facts", id: "function-facts" });
  const input = el("textarea", { id: "payload", name: "payload", rows: "5", spellcheck: "false",
    "aria-describedby": "payload-help" });
  const invoked = el("p", { id: "invoked", role: "status" });
  const send = el("button", { type: "submit", id: "invoke", text: "Invoke" });
  const form = el("form", { class: "invoke", onsubmit: async (event) => {
    event.preventDefault();
    invoked.textContent = "";
    let payload;
    try {
      payload = input.value.trim() ? JSON.parse(input.value) : null;
    } catch (e) {
      invoked.replaceChildren(el("span", { class: "error", text: `The input is not JSON (${e.message}): fix it and invoke again.` }));
      input.focus();
      return;
    }
    send.disabled = true;
    try {
      const inv = await api(`/v1/functions/${encodeURIComponent(name)}/invocations`, { method: "POST", body: payload });
      invoked.replaceChildren("Accepted ", el("a", { href: `#/invocations/${encodeURIComponent(inv.id)}`,
        "data-id": inv.id, text: inv.id }), ` (${inv.state}). `, el("span", { class: "muted", text: "Its page follows it." }));
      refresh();
    } catch (e) {
      invoked.replaceChildren(el("span", { class: "error", text: e.message }));
      if (e.status === 401) throw e;
    } finally {
      send.disabled = false;
    }
  } },
  el("label", { for: "payload", text: "Input (JSON)" }), input,
  el("p", { id: "payload-help", class: "muted", text: "Sent as the invocation's payload, as with " +
    `eops invoke ${name} --data '…'; empty sends null.` }), send, invoked);
  const picker = el("select", { id: "range", onchange: () => {
    location.hash = `#/functions/${encodeURIComponent(name)}?range=${picker.value}`;
  } }, RANGES.map(([v, text]) => el("option", { value: v, text, selected: v === range })));
  const charts = el("div", { id: "series" });
  main.append(el("p", {}, el("a", { href: "#/functions", text: "← Functions" })),
    el("h1", { text: name }), error, facts,
    el("h2", { text: "Invoke" }), form,
    el("h2", { text: "Over time" }),
    el("div", { class: "filters" }, el("label", { for: "range", text: "Range" }), picker,
      el("a", { href: `#/invocations?function=${encodeURIComponent(name)}`, text: "its invocations" })),
    charts);

  const gone = new AbortController();
  let filled = false;

  async function loadSpec() {
    const { spec, version, updated_at } = await api(`/v1/functions/${encodeURIComponent(name)}`, { signal: gone.signal });
    const gpu = `${spec.gpu.count ?? 1} × ${[].concat(spec.gpu.type).join(" | ")}`;
    facts.replaceChildren(...[["Version", String(version)], ["Updated", when(updated_at)], ["GPU", gpu],
      ["Priority", spec.priority], ["Runs", runs(spec, session.backend)], ["Timeout", seconds(spec.timeout_seconds)]]
      .flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]),
    el("dt", { text: "Spec" }), el("dd", {}, el("details", {}, el("summary", { text: "as deployed" }),
      el("pre", { class: "spec", text: JSON.stringify(spec, null, 2) }))));
    if (!filled) {  // its example input (`example` in the spec), else an empty object to edit
      filled = true;
      input.value = spec.example === null || spec.example === undefined ? "{}" : JSON.stringify(spec.example, null, 2);
      input.dataset.from = spec.example === null || spec.example === undefined ? "empty" : "example";
    }
  }

  // The latest invocations back to the range's start, a page of 500 at a time, at most 2,000.
  async function loadSeries() {
    const until = Date.now();
    const since = Math.floor((until - span) / step) * step + step;
    const items = [];
    let cursor = null, pages = 0, complete = false;
    while (pages < PAGES) {
      const q = new URLSearchParams({ function: name, limit: String(PAGE) });
      if (cursor) q.set("cursor", cursor);
      const page = await api(`/v1/invocations?${q}`, { signal: gone.signal });
      pages += 1;
      items.push(...page.items);
      const oldest = page.items.length ? Date.parse(page.items[page.items.length - 1].timeline.accepted) : 0;
      cursor = page.next_cursor;
      if (!cursor || oldest < since) { complete = true; break; }
    }
    const from = complete ? since : Math.max(since, Date.parse(items[items.length - 1].timeline.accepted));
    const buckets = series(items, since, until, step);
    const width = widthOf(charts);
    const pick = (key) => buckets.map((b) => ({ start: b.start, value: b[key] }));
    const total = buckets.reduce((s, b) => s + b.invocations, 0);
    charts.dataset.total = String(total);
    charts.replaceChildren(
      el("p", { class: "muted", id: "series-covers", text: `${rangeText} in buckets of ${seconds(step / 1000)}, ` +
        `from ${when(since)}: ${total} invocations. ` + (complete ? "" : `Only the latest ${items.length} were ` +
        `read, which go back to ${when(from)}: earlier buckets are short.`) }),
      el("h3", { text: "Invocations" }), bars(pick("invocations"), { name: "invocations", step, width }),
      el("h3", { text: "Failures (failed or timed out)" }), bars(pick("failures"), { name: "failures", step, width }),
      el("h3", { text: "p95 time to start" }), bars(pick("p95Start"), { name: "p95", step, width, format: seconds, whole: false }));
  }

  let busy = false, timer = null;
  function refresh() {
    if (busy) return;
    busy = true;
    loadSeries().catch((e) => { if (e.name !== "AbortError") error.textContent = e.message; })
      .finally(() => { busy = false; });
  }
  loadSpec().catch((e) => { if (e.name !== "AbortError") { error.textContent = e.message; if (e.status === 401) throw e; } });
  refresh();
  // An invocation ending moves the failures and the p95: read again on changes, at most every 10 s.
  const close = events([], () => { if (timer === null) timer = setTimeout(() => { timer = null; refresh(); }, REFRESH_MS); });
  return () => { gone.abort(); close(); clearTimeout(timer); };
}
