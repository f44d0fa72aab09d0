// Capacity: GPUs in use per type against the budget, the queue and its head, warm headroom,
// GPU nodes by state, and the samples this replica holds (up to keep_s) as a chart titled by
// the span they cover; redrawn on changes (at most once a second) and every few seconds for
// the chart's samples.
import { api, events } from "./api.js";
import { svg, widthOf, yAxis } from "./chart.js";
import { clock, el, seconds, when } from "./format.js";

const LINES = [["demand", "demand (GPUs in use + queued)"], ["nodes", "GPU nodes / slots"], ["headroom_held", "warm headroom held"]];

function chart(history, width) {
  const height = 220;
  const box = { left: 44, right: width - 12, top: 12, bottom: height - 26 };
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "chart", id: "capacity-chart",
    role: "img", "aria-label": `demand, nodes and headroom over the last ${history.length} samples` });
  if (history.length < 2) {
    root.append(svg("text", { x: box.left, y: height / 2 }, "Not enough samples yet."));
    return root;
  }
  const t0 = Date.parse(history[0].at), t1 = Date.parse(history[history.length - 1].at);
  const y = yAxis(root, box, Math.max(1, ...history.flatMap((s) => LINES.map(([k]) => s[k] ?? 0))));
  const x = (s) => box.left + ((Date.parse(s.at) - t0) / Math.max(1, t1 - t0)) * (box.right - box.left);
  const at = t1 - t0 > 20 * 3600 * 1000 ? when : clock;  // past a day, the date too
  root.append(svg("text", { x: box.left, y: height - 6, class: "tick", "text-anchor": "start" }, at(t0)),
    svg("text", { x: box.right, y: height - 6, class: "tick", "text-anchor": "end" }, at(t1)));
  for (const [key] of LINES) {
    const points = history.filter((s) => s[key] !== null).map((s) => `${x(s).toFixed(1)},${y(s[key]).toFixed(1)}`);
    root.append(svg("polyline", { points: points.join(" "), class: `line l-${key}` }));
  }
  return root;
}

// GPUs in use against a cap; a type without a cap of its own is drawn against `whole` (all
// GPUs' cap: the budget's total or the backend's slots) and says so, or, with nothing to draw
// it against, shows no bar at all (an empty bar read as "none in use").
function meter(label, used, cap, whole = null) {
  const against = cap ?? whole;
  const text = cap !== null && cap !== undefined ? `${used} / ${cap}`
    : against !== null && against !== undefined ? `${used} of ${against} (no cap of its own)` : `${used} in use (no cap)`;
  const track = against ? el("span", { class: "track" }, el("span", { class: "bar",
    style: { width: `${Math.min(100, (used / against) * 100)}%` } })) : el("span", { class: "no-track" });
  return el("div", { class: "meter", "data-meter": label, "data-used": String(used), "data-cap": against ?? "" },
    el("span", { class: "label", text: label }), track, el("span", { class: "value", text }));
}

function byCluster(c) {
  const clusters = Object.entries(c.in_use_by_cluster || {});
  if (!clusters.length) return [];
  return [el("h3", { text: "by cluster" }), el("div", { id: "gpus-by-cluster" }, clusters.map(([name, types]) => {
    const used = Object.values(types).reduce((a, b) => a + b, 0);
    const row = meter(name, used, null, c.in_use_total);
    row.dataset.cluster = name;
    row.title = Object.entries(types).map(([t, n]) => `${t}: ${n}`).join(", ");
    return row;
  }))];
}

// GPU nodes by state in each of MultiKueue's workers (the gateway watches each worker's nodes):
// a table, cluster by state, only where the work runs in several clusters.
function nodesByCluster(c) {
  const clusters = Object.entries(c.nodes_by_cluster || {});
  if (!clusters.length) return [];
  const states = Object.keys(c.nodes || clusters[0][1]);
  return [el("h3", { text: "by cluster" }), el("table", { class: "list", id: "nodes-by-cluster" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "cluster" }),
      states.map((s) => el("th", { scope: "col", class: "num", text: s.replace("_", " ") })))),
    el("tbody", {}, clusters.map(([name, counts]) => el("tr", { "data-cluster": name },
      el("th", { scope: "row", text: name }),
      states.map((s) => el("td", { class: "num", "data-state": s, text: String(counts[s] ?? 0) }))))))];
}

export function render(main) {
  const gpus = el("section", { class: "card", id: "gpus", "aria-labelledby": "h-gpus" });
  const queue = el("section", { class: "card", id: "queue", "aria-labelledby": "h-queue" });
  const warm = el("section", { class: "card", id: "warm", "aria-labelledby": "h-warm" });
  const nodes = el("section", { class: "card", id: "nodes", "aria-labelledby": "h-nodes" });
  const history = el("section", { class: "card wide", id: "history", "aria-labelledby": "h-history" });
  const error = el("p", { class: "error", role: "alert" });
  main.append(el("h1", { text: "Capacity" }), error, el("div", { class: "cards" }, gpus, queue, warm, nodes, history));

  function draw(c) {
    const types = Object.keys(c.budget_by_type);
    gpus.replaceChildren(el("h2", { id: "h-gpus", text: "GPUs in use" }),
      // Without a budget, a backend with a fixed number of GPUs (local slots) is the cap.
      meter(c.budget_total === null && c.total_gpus !== null ? "all (slots)" : "all types",
        c.in_use_total, c.budget_total ?? c.total_gpus),
      ...types.map((t) => meter(t, c.in_use[t] || 0, c.budget_by_type[t], c.budget_total ?? c.total_gpus)),
      el("p", { class: "muted", text: c.budget ? `budget ${c.budget}` : "no GPU budget set" }),
      // Only where the work runs in several clusters (MultiKueue's workers): each against the
      // GPUs in use in all, with its GPU types.
      ...byCluster(c));
    gpus.dataset.inUse = String(c.in_use_total);
    const head = c.queue_head;
    queue.replaceChildren(el("h2", { id: "h-queue", text: "Queue" }),
      el("p", { class: "big", "data-queue": String(c.queue_length), text: `${c.queue_length} waiting` }),
      el("p", {}, head ? ["next: ", el("a", { href: `#/invocations/${head.id}`, text: head.id }),
        ` (${head.function}, ${head.priority}), waiting ${seconds(head.waiting_s)}`] : "nothing waiting"),
      el("p", { class: "muted", text: `${c.states.pending || 0} pending, ${c.states.running || 0} running` }));
    const pools = c.headroom;
    warm.replaceChildren(el("h2", { id: "h-warm", text: "Warm headroom" }),
      pools === null ? el("p", { class: "muted", text: c.role === "follower" ? "held by the leader" : "off" })
        : pools.length ? pools.map((p) => meter(p.describe, p.busy, p.held))
          : el("p", { class: "muted", text: "no pools" }));
    nodes.replaceChildren(el("h2", { id: "h-nodes", text: c.nodes ? "GPU nodes" : "GPU slots" }),
      c.nodes ? el("dl", { class: "facts" }, Object.entries(c.nodes).flatMap(([k, v]) =>
        [el("dt", { text: k.replace("_", " ") }), el("dd", { text: String(v) })]))
        : el("p", { text: c.total_gpus === null ? "no fixed number" : `${c.free_gpus} free of ${c.total_gpus}` }),
      ...nodesByCluster(c));
    // Named for what it holds: the span of its samples (since this replica started, until
    // it holds keep_s of them), not the hours it may hold one day.
    const span = c.history.length > 1
      ? (Date.parse(c.history[c.history.length - 1].at) - Date.parse(c.history[0].at)) / 1000 : 0;
    const title = c.history.length > 1 ? `The last ${seconds(span)}` : "History";
    history.replaceChildren(el("h2", { id: "h-history", "data-span-s": span.toFixed(0), text: title }),
      chart(c.history, widthOf(history)),
      el("p", { class: "legend" }, LINES.map(([k, text]) => el("span", { class: `key l-${k}`, text }))),
      el("p", { class: "muted", text: `${c.history.length ? `since ${when(c.history[0].at)}: ` : ""}a sample every ` +
        `${seconds(c.sample_s)}, kept for ${seconds(c.keep_s)} in this replica's memory (a restart starts ` +
        `afresh); now ${when(c.at)}` }));
  }

  // The whole history once, then only the samples after the last one held: a refresh every
  // few seconds would otherwise carry up to keep_s / sample_s samples each time. The gateway
  // answers only samples after `since`, so an answer is appended as it comes.
  let samples = [];
  function merge(c) {
    const oldest = Date.parse(c.at) - c.keep_s * 1000;
    samples = samples.concat(c.history).filter((s) => Date.parse(s.at) >= oldest);
    return { ...c, history: samples };
  }

  let busy = false, again = false, timer = null;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    const last = samples.length ? samples[samples.length - 1].at : null;
    const path = last === null ? "/v1/capacity" : `/v1/capacity?since=${encodeURIComponent(last)}`;
    api(path).then((c) => draw(merge(c))).catch((e) => { error.textContent = e.message; if (e.status === 401) throw e; })
      .finally(() => { busy = false; if (again) { again = false; setTimeout(refresh, 1000); } });
  }
  const close = events([], refresh);
  timer = setInterval(refresh, 5000);
  refresh();
  return () => { close(); clearInterval(timer); };
}
