// Cost: node-seconds by phase per function, per capacity (spot, on-demand, local) and, where
// MultiKueue runs the work in several clusters, per cluster (tables), and per hour (a stacked
// chart) over a chosen range, from one GET /v1/cost?by=function&by=hour&by=capacity&by=cluster,
// and the same report as a CSV file (its capacity and cluster columns included).
// The report is admin-only: an invoke token's session is told so instead of a broken page.
import { api, events } from "./api.js";
import { svg, widthOf, yAxis } from "./chart.js";
import { costBy, el, hourSlots, scroll, seconds, shownPhases, usd, when } from "./format.js";

const RANGES = [["1h", "last hour"], ["24h", "last 24 hours"], ["7d", "last 7 days"]];

function query(since, extra = "") {
  return `/v1/cost?since=${encodeURIComponent(since)}&by=function&by=hour&by=capacity&by=cluster${extra}`;
}

function needsAdmin(main, session) {
  main.append(el("h1", { text: "Cost" }), el("p", { class: "notice", id: "needs-admin", role: "status",
    text: `The cost report needs an admin token: this session's token (${session.token.name}) has scope ` +
      `${session.token.scope}. Log in with an admin token (eops token create --scope admin) to see it.` }));
}

function chart(report, width) {
  const height = 220, left = 60, right = 10, top = 16, bottom = 26;  // drawn at its shown width: text unscaled
  const phases = shownPhases(report.groups);
  const slots = hourSlots(report.since, report.until);
  const hours = new Map(costBy(report.groups, "hour").map((h) => [Date.parse(h.key), h]));
  const most = Math.max(1, ...[...hours.values()].map((h) => h.total));
  const step = (width - left - right) / slots.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", id: "cost-chart", role: "img",
    "aria-label": `node-seconds per hour by phase, ${slots.length} hours, the most ${seconds(most)} in one hour` });
  const axis = yAxis(root, { left, right: width - right, top, bottom: height - bottom }, most, seconds, false);
  const y = (v) => height - bottom - axis(v);  // a height, not a position
  root.append(svg("text", { x: left, y: height - 8, class: "tick" }, when(slots[0])),
    svg("text", { x: width - right, y: height - 8, class: "tick", "text-anchor": "end" },
      when(slots[slots.length - 1])));
  slots.forEach((t, i) => {
    const h = hours.get(t);
    if (!h) return;
    const group = svg("g", { class: "hour", "data-hour": new Date(t).toISOString() });
    group.append(svg("title", {}, `${when(t)}: ${phases
      .map(([p, name]) => `${name} ${seconds(h.node_seconds[p])}`).join(", ")}; ${usd(h.usd)}`));
    let base = height - bottom;
    for (const [p] of phases) {
      const tall = y(h.node_seconds[p]);
      if (tall <= 0) continue;
      base -= tall;
      group.append(svg("rect", { x: left + i * step + step * 0.1, y: base, width: Math.max(1, step * 0.8),
        height: Math.max(0.5, tall), class: `b-${p}` }));
    }
    root.append(group);
  });
  return root;
}

// The chart's numbers as a table too (hours with node time only): what a screen reader or the
// keyboard reads, as the bars' titles show only under a pointer.
function hourTable(report) {
  const phases = shownPhases(report.groups);
  const rows = costBy(report.groups, "hour").filter((h) => h.total > 0);
  return el("details", { class: "hours" }, el("summary", { text: `Per hour as a table (${rows.length} ${rows.length === 1 ? "hour" : "hours"})` }),
    scroll(el("table", { class: "list", id: "hour-table" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Hour" }),
        phases.map(([, name]) => el("th", { scope: "col", class: "num", text: name })),
        el("th", { scope: "col", class: "num", text: "total" }), el("th", { scope: "col", class: "num", text: "cost" }))),
      el("tbody", {}, rows.map((h) => el("tr", {}, el("th", { scope: "row", text: when(h.key) }),
        phases.map(([p]) => el("td", { class: "num", text: seconds(h.node_seconds[p]) })),
        el("td", { class: "num", text: seconds(h.total) }), el("td", { class: "num", text: usd(h.usd) })))))));
}

// What each key's rows are called: a function's name, or what its node time was priced as.
const KEYS = {
  function: { id: "cost-table", heading: "Function", name: (k) => k || "(warm capacity, no function)" },
  capacity: { id: "capacity-table", heading: "Priced as",
    name: (k) => (k === "local" ? "local (GPU slots, priced as on-demand)" : k) },
  cluster: { id: "cluster-table", heading: "Cluster", name: (k) => k || "(none: warm capacity, or one cluster)" },
};

function table(report, key) {
  const { id, heading, name } = KEYS[key];
  const phases = shownPhases(report.groups);
  const rows = costBy(report.groups, key);
  const cells = (r) => [...phases.map(([p]) => el("td", { class: "num", "data-phase": p,
    "data-seconds": r.node_seconds[p].toFixed(3), text: seconds(r.node_seconds[p]) })),
  el("td", { class: "num", text: seconds(r.total) }),
  el("td", { class: "num", "data-usd": r.usd.toFixed(6),
    text: r.unpriced ? `${usd(r.usd)} + ${seconds(r.unpriced)} unpriced` : usd(r.usd) })];
  return el("table", { class: "list", id },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: heading }),
      phases.map(([, text]) => el("th", { scope: "col", class: "num", text })),
      el("th", { scope: "col", class: "num", text: "total" }), el("th", { scope: "col", class: "num", text: "cost" }))),
    el("tbody", {}, rows.length ? rows.map((r) => el("tr", { [`data-${key}`]: r.key },
      el("th", { scope: "row", text: name(r.key) }), cells(r)))
      : el("tr", {}, el("td", { colspan: String(phases.length + 3), class: "muted", text: "no node time in this range" }))),
    el("tfoot", {}, el("tr", {}, el("th", { scope: "row", text: "all" }),
      cells({ node_seconds: Object.fromEntries(phases.map(([p]) => [p, rows.reduce((s, r) => s + r.node_seconds[p], 0)])),
        total: report.total_node_seconds, usd: report.usd, unpriced: report.unpriced_node_seconds }))));
}

export function render(main, arg, { session }) {
  if (session.token.scope !== "admin") return needsAdmin(main, session);
  const since = RANGES.some(([v]) => v === arg) ? arg : "24h";
  const picker = el("select", { id: "since", onchange: () => { location.hash = `#/cost/${picker.value}`; } },
    RANGES.map(([value, text]) => el("option", { value, text, selected: value === since })));
  const download = el("a", { id: "csv", class: "button", href: query(since, "&format=csv"), download: "",
    text: "Download CSV" });
  const error = el("p", { class: "error", role: "alert" });
  const body = el("div", { id: "cost" });
  main.append(el("h1", { text: "Cost" }),
    el("div", { class: "filters" }, el("label", { for: "since", text: "Range" }), picker, download), error, body);

  let shown = null;
  function draw(report) {
    error.textContent = "";
    // Redrawn only when the numbers moved, so a change elsewhere keeps the focus where it is.
    const groups = JSON.stringify(report.groups);
    if (groups === shown) return;
    shown = groups;
    const open = body.querySelector("details.hours")?.open;
    const width = widthOf(body);
    body.replaceChildren(el("h2", { text: "Per function (node-seconds)" }), scroll(table(report, "function")),
      el("h2", { text: "Spot and on demand (node-seconds)" }), scroll(table(report, "capacity")),
      // Only where the work ran in several clusters (MultiKueue): one cluster has nothing to split.
      ...(report.groups.some((g) => g.cluster) ? [el("h2", { text: "Per cluster (node-seconds)" }),
        scroll(table(report, "cluster"))] : []),
      el("h2", { text: "Per hour" }), chart(report, width),
      el("p", { class: "legend" }, shownPhases(report.groups).map(([p, text]) => el("span", { class: `key k-${p}`, text }))),
      hourTable(report),
      el("p", { class: "muted", text: `${when(hourSlots(report.since, report.until)[0])} ` +
        `(the start of the range's first hour: the ledger's grain) to ${when(report.until)}; ` +
        "on the local backend these are GPU slot-seconds, priced as the node of their GPU type" }));
    if (open) body.querySelector("details.hours").open = true;
  }

  let refused = false, timer = null;
  function refresh() {
    api(query(since)).then(draw).catch((e) => {
      if (e.status === 401) throw e;
      if (e.status !== 403) { error.textContent = e.message; return; }
      refused = true;
      main.replaceChildren();
      needsAdmin(main, session);
    });
  }
  // An attempt's node time is written when it ends: a change is the moment to read again, at
  // most once every 2 s however many arrive.
  const close = events([], () => {
    if (!refused && timer === null) timer = setTimeout(() => { timer = null; refresh(); }, 2000);
  });
  refresh();
  return () => { close(); clearTimeout(timer); };
}
